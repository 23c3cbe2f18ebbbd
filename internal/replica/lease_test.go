package replica

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

type fakeLease struct{ held atomic.Bool }

func (l *fakeLease) Held() bool { return l.held.Load() }

// Without its leader lease a leader refuses produce (whatever the acks),
// consumer fetches, offset lookups and record deletions, retriably
// (NOT_LEADER_OR_FOLLOWER), and appends nothing; followers' fetches are
// still served. With it back, everything works again.
func TestLeaseLapsedRefusesClients(t *testing.T) {
	e := newEnv(t, "")
	l := &fakeLease{}
	l.held.Store(true)
	e.m.opts.Lease = l
	e.put(withPartition(newTopic("t", 1, 1, nil), 0, func(p *metadata.Partition) {
		p.Replicas = []int32{1, 2}
		p.ISR = []int32{1}
	}))
	e.append("t", 0, batch(t, "a", 2, 0), AcksLeader)

	l.held.Store(false)
	for _, acks := range []Acks{AcksLeader, AcksAll, AcksNone} {
		if _, err := e.m.Append(context.Background(), "t", 0, batch(t, "b", 1, 0), acks, time.Second); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("append acks=%d without the lease: %v, want ErrNotLeader", acks, err)
		}
	}
	if end := e.log("t", 0).LogEndOffset(); end != 2 {
		t.Fatalf("log end %d after refused appends, want 2", end)
	}
	res := e.m.Fetch(context.Background(), consumerFetch(0, 0), []FetchPartition{part("t", 0, 0)})
	if p := res.Partitions[0]; !errors.Is(p.Err, ErrNotLeader) || len(p.Records) != 0 {
		t.Fatalf("consumer fetch without the lease: %+v, want ErrNotLeader and no records", p)
	}
	res.Release()
	if _, err := e.m.ListOffset("t", 0, -1, TimestampLatest, IsolationHighWatermark); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("ListOffset without the lease: %v, want ErrNotLeader", err)
	}
	if _, _, err := e.m.EndOffsetForEpoch("t", 0, -1, 0); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("EndOffsetForEpoch without the lease: %v, want ErrNotLeader", err)
	}
	if _, err := e.m.DeleteRecords(context.Background(), "t", 0, 1, time.Second); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("DeleteRecords without the lease: %v, want ErrNotLeader", err)
	}
	if start := e.log("t", 0).LogStartOffset(); start != 0 {
		t.Fatalf("log start %d after a refused deletion, want 0", start)
	}
	params := FetchParams{ReplicaID: 2, MaxBytes: 1 << 20, Isolation: IsolationLogEnd}
	res = e.m.Fetch(context.Background(), params, []FetchPartition{part("t", 0, 0)})
	if p := res.Partitions[0]; p.Err != nil || len(values(t, p.Records)) != 2 {
		t.Fatalf("follower fetch without the lease: err %v, %d records; want both records", p.Err, len(values(t, p.Records)))
	}
	res.Release()

	l.held.Store(true)
	if r := e.append("t", 0, batch(t, "c", 1, 0), AcksLeader); r.BaseOffset != 2 {
		t.Fatalf("append with the lease back at offset %d, want 2", r.BaseOffset)
	}
}
