package metadata

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/fjordmq/fjord/internal/topicconfig"
)

// Internal topics: the state of Fjord's own components, kept in topics
// so that it is replicated and recovered like user data. They are
// Kafka's coordinator topics (whose names and record schemas Kafka's
// tools know) and the HTTP gateway's idempotency index. Losing one loses
// that state for every client at once: every group's committed offsets,
// or the memory that keeps a retried HTTP produce from writing twice. So
// the controller refuses to delete them, to change their partition count
// (groups and keys are hashed over it) and to change a config in a way
// that would drop records they still need (CheckInternalTopicConfigs),
// and to create a topic whose name collides with one of theirs in metric
// names; the Kafka listener refuses clients' CreateTopics of them,
// produces to them and DeleteRecords on them. Reading them is allowed,
// as in Kafka.
//
// The list is exact. Names are case sensitive and never trimmed (as
// Kafka's), so "__Consumer_Offsets" or " __consumer_offsets" is another
// topic (or an invalid name); and other names that start with "__" are
// ordinary topics (Debezium's "__debezium-heartbeat.<prefix>"), which
// clients create, write and delete like any other.
const (
	// ConsumerOffsetsTopic holds group offsets and metadata (the group
	// coordinator's; see internal/group).
	ConsumerOffsetsTopic = "__consumer_offsets"
	// TransactionStateTopic is the transaction coordinator's (Kafka's
	// name; Fjord has no transactions yet, but the name is reserved so
	// that a client cannot take it first).
	TransactionStateTopic = "__transaction_state"
	// ShareGroupStateTopic is Kafka 4's share-group state, reserved the
	// same way.
	ShareGroupStateTopic = "__share_group_state"
	// HTTPIdempotencyTopic is the HTTP gateway's idempotency index
	// (internal/httpapi, idempotency.go).
	HTTPIdempotencyTopic = "__fjord_http_idempotency"
)

// ConsumerPoliciesTopic holds the consumer groups' poison policies and
// pauses (internal/poison). It is not an internal topic: Fjord's clients
// (the HTTP gateway, and the CLI as its user) produce to it through the
// Kafka listeners as any client does, so it is not in the list above.
// But its records steer every group's delivery (a dead-letter policy
// copies a group's records to another topic, a skip moves its committed
// offset past records), so the Kafka listeners treat it as a system
// topic: writing it needs ALTER on the cluster and reading it
// DESCRIBE_CONFIGS on the cluster, besides the topic's own ACLs
// (internal/kafkaserver, authz_system.go). Defined here, beside the
// internal topics, so that kafkaserver knows the name without importing
// internal/poison.
const ConsumerPoliciesTopic = "__fjord_consumer_policies"

// InternalTopics returns the names of the internal topics.
func InternalTopics() []string {
	return []string{ConsumerOffsetsTopic, TransactionStateTopic, ShareGroupStateTopic, HTTPIdempotencyTopic}
}

// IsInternalTopic reports whether name is one of the internal topics
// above, exactly.
func IsInternalTopic(name string) bool {
	switch name {
	case ConsumerOffsetsTopic, TransactionStateTopic, ShareGroupStateTopic, HTTPIdempotencyTopic:
		return true
	}
	return false
}

// RefuseInternalPartitions is the answer to growing internal topic name:
// groups are placed on __consumer_offsets by a hash over its partition
// count, and idempotency keys on the gateway's index likewise, so more
// partitions would move each away from the state it has.
func RefuseInternalPartitions(name string) error {
	return InternalTopicError(name, "its partition count is fixed (groups and keys are hashed over it)")
}

// InternalTopicError is the refusal of what on internal topic name: an
// ErrInternalTopic naming the topic, for every surface to answer alike.
func InternalTopicError(name, what string) error {
	return fmt.Errorf("%w: topic %q is internal to Fjord: %s", ErrInternalTopic, name, what)
}

// retained is what a topic's configs make it keep: whether old records
// of a key are compacted away, and how long and how many bytes of
// records delete-retention keeps (-1: no bound; also without the delete
// policy, since retention then removes nothing).
type retained struct {
	compact  bool
	ms       int64
	maxBytes int64
}

// retainedBy is what the config overrides make a topic keep, with
// Kafka's defaults for the configs not overridden.
func retainedBy(configs *topicconfig.Table, overrides map[string]string) (retained, error) {
	value := func(name string) string {
		if v, ok := overrides[name]; ok {
			return v
		}
		def, _ := configs.Lookup(name)
		return def.Default
	}
	policy := SplitList(value("cleanup.policy"))
	r := retained{compact: slices.Contains(policy, "compact"), ms: -1, maxBytes: -1}
	if !slices.Contains(policy, "delete") {
		return r, nil
	}
	var err error
	if r.ms, err = strconv.ParseInt(value("retention.ms"), 10, 64); err != nil {
		return r, fmt.Errorf("%w: retention.ms %q: %v", ErrInvalidConfig, value("retention.ms"), err)
	}
	if r.maxBytes, err = strconv.ParseInt(value("retention.bytes"), 10, 64); err != nil {
		return r, fmt.Errorf("%w: retention.bytes %q: %v", ErrInvalidConfig, value("retention.bytes"), err)
	}
	return r, nil
}

// keepsLess reports whether bound a (-1: none) keeps less than bound b.
func keepsLess(a, b int64) bool { return a >= 0 && (b < 0 || a < b) }

// CheckInternalTopicConfigs refuses a change of topic's config overrides
// from old to next that would make an internal topic keep less than it
// does: turn compaction off, or make delete-retention (cleanup.policy,
// retention.ms, retention.bytes) remove records sooner. The error wraps
// ErrInvalidConfig and names the topic; any change to an ordinary topic,
// and any other change to an internal one, is nil.
//
// Why this rule and not a list of fixed values: the coordinators' topics
// are created compacted without delete, so the rule keeps them exactly
// so (a group's offsets are its latest record per key, however old; with
// delete they would go after retention.ms, and without compaction the
// topic and its load time would grow without end). The gateway's index
// is created "compact,delete" with retention.ms at its idempotency
// window: a shorter retention would forget keys inside the window (a
// retry would write twice), while a longer one, which an operator needs
// after raising the window, is safe. Retention settings under compaction
// alone remove nothing, so they are allowed. Making a topic keep more
// is always allowed, so a topic changed before this check existed can
// be repaired. Other configs (segment size, flush policy, ...) change
// how, not what, a topic keeps.
func (img *Image) CheckInternalTopicConfigs(topic string, old, next map[string]string) error {
	if !IsInternalTopic(topic) {
		return nil
	}
	was, err := retainedBy(img.TopicConfigs, old)
	if err != nil {
		return err
	}
	now, err := retainedBy(img.TopicConfigs, next)
	if err != nil {
		return err
	}
	switch {
	case was.compact && !now.compact:
		return fmt.Errorf("%w: topic %q is internal to Fjord and must stay compacted (cleanup.policy %q would turn compaction off)",
			ErrInvalidConfig, topic, policyOf(img.TopicConfigs, next))
	case keepsLess(now.ms, was.ms):
		return fmt.Errorf("%w: topic %q is internal to Fjord: its records may not be deleted sooner (retention would fall from %s to %s)",
			ErrInvalidConfig, topic, bound(was.ms, "ms"), bound(now.ms, "ms"))
	case keepsLess(now.maxBytes, was.maxBytes):
		return fmt.Errorf("%w: topic %q is internal to Fjord: its records may not be deleted sooner (retention would fall from %s to %s)",
			ErrInvalidConfig, topic, bound(was.maxBytes, "bytes"), bound(now.maxBytes, "bytes"))
	}
	return nil
}

func policyOf(configs *topicconfig.Table, overrides map[string]string) string {
	if v, ok := overrides["cleanup.policy"]; ok {
		return v
	}
	def, _ := configs.Lookup("cleanup.policy")
	return def.Default
}

func bound(v int64, unit string) string {
	if v < 0 {
		return "unbounded"
	}
	return strconv.FormatInt(v, 10) + " " + unit
}
