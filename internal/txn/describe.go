package txn

// DescribeTransactions: v0; ListTransactions: v0-2 (C§10; KIP-664,
// KIP-994, KIP-1152)
//
// DescribeTransactions answers each id's current state (not a
// transition in flight): per id, an empty id is INVALID_REQUEST, a
// partition not loaded here NOT_COORDINATOR or
// COORDINATOR_LOAD_IN_PROGRESS, an unknown id TRANSACTIONAL_ID_NOT_FOUND.
// A Prepare* transaction shows the partitions whose markers are not
// written yet; Empty and Complete* show none.
//
// ListTransactions lists the ids this coordinator has, filtered; the
// admin client asks every node and merges. It fails whole with
// COORDINATOR_LOAD_IN_PROGRESS while any partition is loading, and with
// INVALID_REGULAR_EXPRESSION for a pattern that does not compile.
// Authorization (which ids and topics the caller may see) is the
// protocol layer's.

import (
	"regexp"
	"slices"
	"strings"
)

// TransactionDescription is one id's DescribeTransactions answer.
type TransactionDescription struct {
	TransactionalID string
	// Err is nil, or the id's error (see the file comment); the other
	// fields are then zero.
	Err           error
	State         State
	TimeoutMs     int32
	StartTimeMs   int64 // -1: no transaction started since InitProducerId
	ProducerID    int64
	ProducerEpoch int16
	Partitions    []TopicPartition // sorted
}

// DescribeTransactions describes each id of ids, in order.
func (c *Coordinator) DescribeTransactions(ids []string) []TransactionDescription {
	out := make([]TransactionDescription, len(ids))
	for i, id := range ids {
		out[i] = c.describe(id)
	}
	return out
}

func (c *Coordinator) describe(id string) TransactionDescription {
	d := TransactionDescription{TransactionalID: id}
	if id == "" {
		d.Err = ErrInvalidRequest
		return d
	}
	_, m, err := c.lockMetadata(id)
	switch {
	case err != nil:
		d.Err = err
		return d
	case m == nil:
		d.Err = ErrTransactionalIDNotFound
		return d
	}
	defer m.mu.Unlock()
	cur := m.mu.cur
	d.State = cur.state
	d.TimeoutMs = cur.timeoutMs
	d.StartTimeMs = cur.startMs
	d.ProducerID = cur.producerID
	d.ProducerEpoch = cur.producerEpoch
	d.Partitions = slices.Clone(cur.partitions)
	if cur.state.isPrepare() && m.mu.awaitingMarkers != nil {
		d.Partitions = slices.Clone(m.mu.awaitingMarkers)
	}
	return d
}

// ListTransactionsFilter selects what ListTransactions lists; every
// filter must pass.
type ListTransactionsFilter struct {
	// States are state names (State.String); empty: any. Names that are
	// no state are answered back as unknown and match nothing.
	States []string
	// ProducerIDs; empty: any.
	ProducerIDs []int64
	// DurationFilterMs (v1, KIP-994): only transactions started more than
	// this long ago (now - start > it); negative: no filter. Empty and
	// Complete* pass on their old start, as in Kafka: combine it with the
	// Ongoing state.
	DurationFilterMs int64
	// TransactionalIDPattern (v2, KIP-1152): an RE2 expression the whole
	// id must match; empty: any.
	TransactionalIDPattern string
}

// TransactionListing is one id in ListTransactions' answer.
type TransactionListing struct {
	TransactionalID string
	ProducerID      int64
	State           State
}

// ListTransactions lists the ids of the loaded partitions that pass f,
// sorted by id, and the state names of f that are no state.
func (c *Coordinator) ListTransactions(f ListTransactionsFilter) (txns []TransactionListing, unknownStates []string, err error) {
	var pattern *regexp.Regexp
	if f.TransactionalIDPattern != "" {
		// Anchored as Java's Matcher.matches(): the whole id.
		if pattern, err = regexp.Compile(`^(?:` + f.TransactionalIDPattern + `)$`); err != nil {
			return nil, nil, ErrInvalidRegularExpression
		}
	}
	var states []State
	for _, name := range f.States {
		if s, ok := ParseState(name); ok {
			states = append(states, s)
		} else {
			unknownStates = append(unknownStates, name)
		}
	}
	all, loading := c.loadedTransactions()
	if err := c.listStatus(); err != nil {
		return nil, nil, err
	}
	if loading {
		return nil, nil, ErrCoordinatorLoadInProgress
	}
	if len(f.States) > 0 && len(states) == 0 {
		// Only unknown states: nothing can match.
		return nil, unknownStates, nil
	}
	now := c.nowMs()
	for _, m := range all {
		m.mu.Lock()
		cur, removed := m.mu.cur, m.mu.removed
		m.mu.Unlock()
		switch {
		case removed:
		case len(states) > 0 && !slices.Contains(states, cur.state):
		case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, cur.producerID):
		case f.DurationFilterMs >= 0 && now-cur.startMs <= f.DurationFilterMs:
		case pattern != nil && !pattern.MatchString(m.transactionalID):
		default:
			txns = append(txns, TransactionListing{TransactionalID: m.transactionalID, ProducerID: cur.producerID, State: cur.state})
		}
	}
	slices.SortFunc(txns, func(a, b TransactionListing) int { return strings.Compare(a.TransactionalID, b.TransactionalID) })
	return txns, unknownStates, nil
}

// listStatus is ListTransactions' error for a closed coordinator.
func (c *Coordinator) listStatus() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return ErrCoordinatorNotAvailable
	}
	return nil
}
