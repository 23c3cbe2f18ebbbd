package history

import (
	"fmt"
	"strings"
	"time"
)

// The kinds of broken guarantee the Checker names. A report counts its
// violations by kind, so a run against a broker that loses records says
// "lost" and one against a broker that serves uncommitted records says
// "unstable-read", whatever else the same fault caused.
const (
	// KindLost: an acknowledged record is nowhere in the log.
	KindLost = "lost"
	// KindMoved: an acknowledged record is in the log, but not at the
	// offset it was acknowledged at (records reordered or shifted).
	KindMoved = "moved"
	// KindDuplicate: one value twice in a topic's log, or acknowledged
	// at two offsets (a retry written again).
	KindDuplicate = "duplicate"
	// KindConflictingAck: one offset acknowledged for two records.
	KindConflictingAck = "conflicting-ack"
	// KindPhantom: a record in the log that no producer sent.
	KindPhantom = "phantom"
	// KindCorrupt: a record read back with a key other than the one it
	// was sent with.
	KindCorrupt = "corrupt"
	// KindOutOfOrder: one key's records out of the order they were sent.
	KindOutOfOrder = "out-of-order"
	// KindProducerOrder: one producer's records in a partition out of
	// the order it sent them (an idempotent producer's order holds per
	// partition, whatever the keys).
	KindProducerOrder = "producer-order"
	// KindBadOffsets: offsets that do not increase within a partition,
	// or a record that claims another partition.
	KindBadOffsets = "bad-offsets"
	// KindUnstableRead: a record a reader was served is gone from the
	// log, or replaced.
	KindUnstableRead = "unstable-read"
	// KindDivergentRead: two readers served two records at one offset.
	KindDivergentRead = "divergent-read"
	// KindTwoOwners: a group's partition assigned to a member while
	// another still owned it.
	KindTwoOwners = "two-owners"
	// KindCommitPastProcessed: a group committed past what any member
	// processed.
	KindCommitPastProcessed = "commit-past-processed"
	// KindCommitBackwards: a commit the coordinator acknowledged below
	// an earlier acknowledged one.
	KindCommitBackwards = "commit-backwards"
	// KindCommitLost: the coordinator answers a committed offset below
	// the last commit it acknowledged.
	KindCommitLost = "commit-lost"
	// KindSkipped: records below a group's committed offset that no
	// member of the group processed.
	KindSkipped = "skipped"
	// KindBadHistory: the history itself is unusable (a value sent
	// twice): the workload, not the broker, is wrong.
	KindBadHistory = "bad-history"
	// KindAbortedRead: a record of an aborted transaction was read, by
	// a read_committed reader or in the read-back (Aborted).
	KindAbortedRead = "aborted-read"
)

// A Violation is one broken guarantee: its kind and what was seen.
type Violation struct {
	Kind string
	Text string
	// Where it is, when it is about one record: its partition (Topic
	// empty otherwise) and offset (-1 when about no single offset), and
	// At, when the acknowledgement or read it concerns happened (zero
	// when none). A report shows the operations around it from these,
	// and a MayLose window is held against At.
	TopicPartition TopicPartition
	Offset         int64
	At             time.Time
	// AllowedBy is the reason of the MayLose window that excused it
	// (Result.Allowed), "" for a violation.
	AllowedBy string
}

func (v Violation) String() string { return v.Kind + ": " + v.Text }

// Violations is Verify's error: every violation found, in the order
// found, with the summary of what was checked.
type Violations struct {
	Summary Summary
	All     []Violation
}

// Counts is the number of violations of each kind.
func (vs *Violations) Counts() map[string]int {
	counts := make(map[string]int)
	for _, v := range vs.All {
		counts[v.Kind]++
	}
	return counts
}

// Error lists the first maxReported violations, one a line, and counts
// the rest.
func (vs *Violations) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "checker: %d violations (%v):", len(vs.All), vs.Summary)
	for i, v := range vs.All {
		if i == maxReported {
			fmt.Fprintf(&b, "\n... and %d more", len(vs.All)-maxReported)
			break
		}
		b.WriteString("\n")
		b.WriteString(v.String())
	}
	return b.String()
}
