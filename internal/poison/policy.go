package poison

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Topic holds the policies and pauses (see the package doc). Its name
// is metadata's, where the Kafka listeners find it to require cluster
// rights of whoever writes or reads it (metadata.ConsumerPoliciesTopic).
const Topic = metadata.ConsumerPoliciesTopic

// Expected conditions. Callers test them with errors.Is; the message
// after the sentinel's says what was wrong, in the user's terms, so the
// HTTP API and the CLI can show it as it is (400, exit 1).
var (
	// ErrInvalidPolicy: SetPolicy or ClearPolicy (or Policy.Validate)
	// refused the policy; nothing was written.
	ErrInvalidPolicy = errors.New("invalid poison policy")
	// ErrInvalidPause: Pause or Resume refused the group, topic,
	// partition, offset or attempts; nothing was written.
	ErrInvalidPause = errors.New("invalid partition pause")
	// ErrClosed: the Store was closed.
	ErrClosed = errors.New("poison: store closed")
)

// Action is what a group does with a record that failed MaxAttempts
// times.
type Action string

const (
	// ActionPause stops delivering the partition to the group at the
	// record, until an operator resumes it (Store.Resume).
	ActionPause Action = "pause"
	// ActionDLQ writes the record to the dead-letter topic and then lets
	// the group's committed offset move past it.
	ActionDLQ Action = "dlq"
)

const (
	// MaxAttemptsLimit bounds Policy.MaxAttempts: a record that failed a
	// thousand times is not going to succeed, and the attempts counter
	// lives in memory per delivered offset.
	MaxAttemptsLimit = 1000
	// MaxReasonBytes bounds Pause.Reason: a reason is an error message,
	// shown by describe and logged; a kilobyte holds any useful one, and
	// it bounds what a failing consumer can make every node store.
	MaxReasonBytes = 1024
	// maxGroupBytes is a Kafka STRING's limit (int16 length): every
	// group a Kafka client can join fits, and the key's uint16 length
	// holds it.
	maxGroupBytes = math.MaxInt16
	// dlqSuffix makes the default dead-letter topic's name.
	dlqSuffix = ".dlq"
)

// Policy is a consumer group's poison-record policy on one topic: after
// MaxAttempts failed attempts at one offset, pause the partition for the
// group (ActionPause), or write the record to the dead-letter topic and
// move on (ActionDLQ).
//
// DLQTopic names the dead-letter topic; "" means DefaultDLQTopic(Topic).
// It is allowed under either action, because a pause is ended by an
// operator's `fjord group resume --skip`, which moves the poison record
// to the dead-letter topic too (issue 18): a pause policy names where
// that goes. DeadLetterTopic returns the topic in effect.
type Policy struct {
	Group, Topic string
	Action       Action
	MaxAttempts  int32
	DLQTopic     string
}

// DefaultDLQTopic is topic's dead-letter topic when a policy names none.
func DefaultDLQTopic(topic string) string { return topic + dlqSuffix }

// DeadLetterTopic is the dead-letter topic in effect: DLQTopic, or the
// default when that is "".
func (p Policy) DeadLetterTopic() string {
	if p.DLQTopic == "" {
		return DefaultDLQTopic(p.Topic)
	}
	return p.DLQTopic
}

// Validate says what is wrong with p, in an error wrapping
// ErrInvalidPolicy, or nil: an empty or over-long group; a topic name
// Kafka refuses; an action other than ActionPause and ActionDLQ (names
// are case sensitive); MaxAttempts outside 1 to MaxAttemptsLimit; a
// dead-letter topic (as given, or the default) that is not a valid
// topic name (the default can be too long: a 246-character topic plus
// ".dlq"), that is the source topic itself (a failed record would be
// written back where it failed, and delivered again), or that is
// internal to Fjord.
func (p Policy) Validate() error {
	if err := validateID(p.Group, p.Topic); err != "" {
		return fmt.Errorf("%w: %s", ErrInvalidPolicy, err)
	}
	switch p.Action {
	case ActionPause, ActionDLQ:
	case "":
		return fmt.Errorf("%w: the action is empty (allowed: %s, %s)", ErrInvalidPolicy, ActionPause, ActionDLQ)
	default:
		return fmt.Errorf("%w: the action %q is unknown (allowed: %s, %s)", ErrInvalidPolicy, string(p.Action), ActionPause, ActionDLQ)
	}
	if p.MaxAttempts < 1 || p.MaxAttempts > MaxAttemptsLimit {
		return fmt.Errorf("%w: max attempts is %d (allowed: 1 to %d)", ErrInvalidPolicy, p.MaxAttempts, MaxAttemptsLimit)
	}
	dlq := p.DeadLetterTopic()
	switch {
	case p.DLQTopic == "" && len(dlq) > metadata.MaxTopicNameLength:
		return fmt.Errorf("%w: the default dead-letter topic %q is %d characters long (allowed: at most %d): name a shorter one",
			ErrInvalidPolicy, dlq, len(dlq), metadata.MaxTopicNameLength)
	case topicNameProblem(dlq) != "":
		return fmt.Errorf("%w: dead-letter topic: %s", ErrInvalidPolicy, topicNameProblem(dlq))
	case dlq == p.Topic:
		return fmt.Errorf("%w: the dead-letter topic %q is the source topic: a failed record would be written back where it failed", ErrInvalidPolicy, dlq)
	case dlq == Topic || metadata.IsInternalTopic(dlq):
		return fmt.Errorf("%w: the dead-letter topic %q is internal to Fjord", ErrInvalidPolicy, dlq)
	}
	return nil
}

// Pause says that Group stopped delivering Partition of Topic at Offset,
// for Reason, after Attempts failed attempts, at At.
type Pause struct {
	Group, Topic string
	Partition    int32
	Offset       int64
	// Reason is stored as valid UTF-8 (other bytes become U+FFFD) of at
	// most MaxReasonBytes, cut at a character boundary.
	Reason   string
	Attempts int32
	// At is kept to the millisecond; Store.Pause sets it to now when it
	// is zero.
	At time.Time
	// Skip says the pause was resolved with a skip (`fjord group resume
	// --skip`): the record's dead-letter copy is written, and the
	// partition's owner is to commit past Offset and then remove the
	// pause. It is a field of the pause, not a record of its own, so that
	// the owner learns of it wherever it runs, and a crash before the
	// commit leaves it to be done again rather than lost.
	Skip bool
}

// validate says what is wrong with p, in an error wrapping
// ErrInvalidPause, or nil. Reason and At are not refused but made fit
// (normalized).
func (p Pause) validate() error {
	return validatePartition(p.Group, p.Topic, p.Partition, p.Offset, p.Attempts)
}

func validatePartition(group, topic string, partition int32, offset int64, attempts int32) error {
	if err := validateID(group, topic); err != "" {
		return fmt.Errorf("%w: %s", ErrInvalidPause, err)
	}
	switch {
	case partition < 0:
		return fmt.Errorf("%w: partition %d is negative", ErrInvalidPause, partition)
	case offset < 0:
		return fmt.Errorf("%w: offset %d is negative", ErrInvalidPause, offset)
	case attempts < 0:
		return fmt.Errorf("%w: attempts %d is negative", ErrInvalidPause, attempts)
	}
	return nil
}

// normalized is p as the topic keeps it: the reason made valid UTF-8
// (JSON would replace the other bytes anyway; doing it first makes what
// the writer holds what every reader reads) and cut to MaxReasonBytes at
// a character boundary, the time to the millisecond.
func (p Pause) normalized() Pause {
	r := strings.ToValidUTF8(p.Reason, string(utf8.RuneError))
	if len(r) > MaxReasonBytes {
		cut := MaxReasonBytes
		for cut > 0 && !utf8.RuneStart(r[cut]) {
			cut--
		}
		r = r[:cut]
	}
	p.Reason = r
	p.At = time.UnixMilli(p.At.UnixMilli())
	return p
}

// validateID says what is wrong with a (group, topic) pair, or "".
// Groups are Kafka's: any non-empty string a client can send (Fjord
// compares them byte for byte, so no trimming or character rules).
func validateID(group, topic string) string {
	switch {
	case group == "":
		return "the group is empty"
	case len(group) > maxGroupBytes:
		return fmt.Sprintf("the group is %d bytes long (allowed: at most %d)", len(group), maxGroupBytes)
	}
	return topicNameProblem(topic)
}

// topicNameProblem is metadata.ValidateTopicName's reason for refusing
// name, without its Kafka error code prefix (which reads
// "INVALID_TOPIC_EXCEPTION: The request attempted to perform an
// operation on an invalid topic"), or "" for a valid name. Kafka's rule
// is used as it is, so a policy can never name a topic that could not be
// created.
func topicNameProblem(name string) string {
	err := metadata.ValidateTopicName(name)
	if err == nil {
		return ""
	}
	return strings.TrimPrefix(err.Error(), metadata.ErrInvalidTopicName.Error()+": ")
}
