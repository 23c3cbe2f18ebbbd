package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Raft's word that a voter is unreachable shortens only the previous
// active controller's session, and only while this term has not heard
// it: any other broker may hold a leader's lease granted by the previous
// controller just before this one took over, so it keeps its whole
// session (sessions.go's file comment).
func TestUnreachableShortensOnlyThePredecessor(t *testing.T) {
	const timeout, grace = 750 * time.Millisecond, 150 * time.Millisecond
	start := time.Unix(1_000_000, 0)
	s := newSessions(start, 1)
	s.unreachable(1, start, timeout, grace)
	s.unreachable(2, start, timeout, grace)
	s.unreachable(3, start, timeout, grace)
	s.heartbeat(controlplane.Heartbeat{NodeID: 3, BrokerEpoch: 7, MetadataOffset: 7}, start)
	at := start.Add(grace + time.Millisecond)
	if s.live(1, at, timeout) {
		t.Error("the previous controller's broker, unreachable and unheard, is live past the grace")
	}
	if !s.live(2, at, timeout) {
		t.Error("another unreachable broker lost its session after the grace; it must keep a whole session")
	}
	if !s.live(2, start.Add(timeout-time.Millisecond), timeout) || s.live(2, start.Add(timeout), timeout) {
		t.Error("another unreachable broker's session is not the term's whole session")
	}

	// Heard in this term: its heartbeats decide, even for the predecessor.
	s = newSessions(start, 3)
	s.heartbeat(controlplane.Heartbeat{NodeID: 3, BrokerEpoch: 7, MetadataOffset: 7}, start)
	s.unreachable(3, start, timeout, grace)
	if !s.live(3, at, timeout) {
		t.Error("the predecessor, heard in this term, was cut to the grace")
	}

	// No predecessor seen (-1): nobody is shortened.
	s = newSessions(start, -1)
	s.unreachable(1, start, timeout, grace)
	if !s.live(1, at, timeout) {
		t.Error("with no known predecessor an unreachable broker was cut to the grace")
	}
}

// The predecessor is the leader before this node's term as Raft reported
// them: none when this node led the term before too, and the same
// whether or not this node's own election has been observed yet.
func TestPredecessor(t *testing.T) {
	c := &Controller{cfg: Config{NodeID: 2}}
	c.leaders.current, c.leaders.previous = -1, -1
	if p := c.predecessor(); p != -1 {
		t.Fatalf("no leader seen: predecessor %d, want -1", p)
	}
	c.sawLeader(1)
	if p := c.predecessor(); p != 1 {
		t.Fatalf("leader 1, own election not observed yet: predecessor %d, want 1", p)
	}
	c.sawLeader(2)
	c.sawLeader(2) // repeated: no change
	if p := c.predecessor(); p != 1 {
		t.Fatalf("1 then 2: predecessor %d, want 1", p)
	}
	// The usual failover: 1 led, no leader, 2 elected.
	c = &Controller{cfg: Config{NodeID: 2}}
	c.leaders.current, c.leaders.previous = -1, -1
	c.sawLeader(1)
	c.sawLeader(-1)
	c.sawLeader(2)
	if p := c.predecessor(); p != 1 {
		t.Fatalf("1, none, 2: predecessor %d, want 1", p)
	}
	// 2 loses its term and wins the next with no other leader between:
	// it was its own predecessor.
	c.sawLeader(-1)
	c.sawLeader(2)
	if p := c.predecessor(); p != -1 {
		t.Fatalf("2, none, 2 again: predecessor %d, want -1", p)
	}
}

// A broker in controlled shutdown waits for the others' heartbeats to
// reach the image in which it leads nothing: a fenced broker is not
// waited for, a heartbeat from an older registration does not count,
// and after othersAppliedWait the wait ends, naming who was behind,
// once.
func TestOthersAppliedBeforeAControlledShutdownEnds(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	img := &metadata.Image{Offset: 50, Brokers: map[int32]metadata.Broker{
		1: {NodeID: 1, Epoch: 10, ShuttingDown: true},
		2: {NodeID: 2, Epoch: 20},
		3: {NodeID: 3, Epoch: 30},
		4: {NodeID: 4, Epoch: 40, Fenced: true},
	}}
	s := newSessions(start, -1)
	s.heartbeat(controlplane.Heartbeat{NodeID: 2, BrokerEpoch: 20, MetadataOffset: 50}, start)
	s.heartbeat(controlplane.Heartbeat{NodeID: 3, BrokerEpoch: 29, MetadataOffset: 60}, start) // an older registration
	if ok, behind := s.othersApplied(img, 1, start); ok || behind != nil {
		t.Fatalf("with broker 3 heard only at an older epoch: %v %v, want not yet", ok, behind)
	}
	s.heartbeat(controlplane.Heartbeat{NodeID: 3, BrokerEpoch: 30, MetadataOffset: 49}, start)
	// The image moves on; the offset to reach stays the first one seen.
	later := *img
	later.Offset = 70
	if ok, _ := s.othersApplied(&later, 1, start); ok {
		t.Fatal("with broker 3 one offset behind: ok, want not yet")
	}
	s.heartbeat(controlplane.Heartbeat{NodeID: 3, BrokerEpoch: 30, MetadataOffset: 50}, start)
	if ok, behind := s.othersApplied(&later, 1, start); !ok || behind != nil {
		t.Fatalf("with every unfenced broker at offset 50: %v %v, want ok", ok, behind)
	}

	// Another shutdown, broker 2 stuck behind: the wait ends after
	// othersAppliedWait and says so once.
	img.Offset = 80
	img.Brokers[3] = metadata.Broker{NodeID: 3, Epoch: 31, ShuttingDown: true}
	if ok, _ := s.othersApplied(img, 3, start); ok {
		t.Fatal("broker 2 at offset 50 of 80: ok, want not yet")
	}
	if ok, _ := s.othersApplied(img, 3, start.Add(othersAppliedWait-time.Millisecond)); ok {
		t.Fatal("just before othersAppliedWait: ok, want not yet")
	}
	ok, behind := s.othersApplied(img, 3, start.Add(othersAppliedWait))
	if !ok || len(behind) != 1 || !strings.HasPrefix(behind[0], "2 ") {
		t.Fatalf("at othersAppliedWait: %v %v, want ok, naming broker 2", ok, behind)
	}
	if ok, behind := s.othersApplied(img, 3, start.Add(2*othersAppliedWait)); !ok || behind != nil {
		t.Fatalf("after giving up once: %v %v, want ok and nothing more to say", ok, behind)
	}
}
