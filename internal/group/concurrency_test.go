package group

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// client is a group consumer the way a real client behaves: it joins,
// syncs (assigning if it leads), heartbeats and commits, and on any error
// rejoins (with no member id when it was forgotten).
type client struct {
	h         *harness
	group     string
	index     int // its partition of topic "t"
	memberID  string
	gen       int32
	lastGen   int32
	committed int64 // last offset committed successfully
	next      int64
}

// forget drops the member id the coordinator no longer knows. Its group
// may have been removed meanwhile (an Empty group without offsets goes at
// the next retention check, as in Kafka), so generations start over.
func (c *client) forget() {
	c.memberID = ""
	c.lastGen = 0
}

func (c *client) run(iterations int) error {
	req := memberReq(c.group, fmt.Sprintf("c%d", c.index))
	req.SessionTimeout = time.Minute
	req.RebalanceTimeout = 2 * time.Second
	req.RequireKnownMemberID = true
	joined := false
	for i := 0; i < iterations; i++ {
		if !joined {
			req.MemberID = c.memberID
			res := c.h.c.JoinGroup(c.h.ctx, req)
			switch {
			case res.Err == ErrMemberIDRequired:
				c.memberID = res.MemberID
				continue
			case res.Err == ErrUnknownMemberID || res.Err == ErrFencedInstanceID:
				c.forget()
				continue
			case res.Err != nil:
				continue
			}
			if res.Generation <= c.lastGen {
				return fmt.Errorf("member %d: generation went from %d to %d", c.index, c.lastGen, res.Generation)
			}
			c.memberID, c.gen, c.lastGen = res.MemberID, res.Generation, res.Generation
			var assignments map[string][]byte
			if res.LeaderID == res.MemberID {
				assignments = make(map[string][]byte)
				for _, m := range res.Members {
					assignments[m.MemberID] = []byte(m.MemberID)
				}
			}
			sres := c.h.c.SyncGroup(c.h.ctx, SyncRequest{Group: c.group, MemberID: c.memberID, Generation: c.gen, Assignments: assignments})
			if sres.Err != nil {
				continue
			}
			if string(sres.Assignment) != c.memberID {
				return fmt.Errorf("member %d got assignment %q", c.index, sres.Assignment)
			}
			joined = true
		}
		if err := c.h.c.Heartbeat(HeartbeatRequest{Group: c.group, MemberID: c.memberID, Generation: c.gen}); err != nil {
			joined = false
			if err == ErrUnknownMemberID {
				c.forget()
			}
			continue
		}
		c.next++
		err, partErrs := c.h.c.CommitOffsets(c.h.ctx, CommitRequest{Group: c.group, MemberID: c.memberID, Generation: c.gen,
			Offsets: []OffsetCommit{oc("t", int32(c.index), c.next)}})
		if err == nil && partErrs[0] == nil {
			c.committed = c.next
		}
	}
	if c.memberID != "" {
		c.h.c.LeaveGroup(c.h.ctx, c.group, []LeaveMember{{MemberID: c.memberID}})
	}
	return nil
}

// Many connections at once: groups of clients churn through rebalances
// (some forced by the rebalance timeout as the clock runs) while readers
// list and describe. Run with -race. Checks: no client sees its
// generation go backwards while it stays a member, or another member's
// assignment; one group's
// appends never overlap; every group's committed offsets are each
// client's last successful commit; and a coordinator loading the log
// afterwards serves the same offsets.
func TestConcurrentGroups(t *testing.T) {
	h := newHarness(t, func(c *Config) {
		c.InitialRebalanceDelay = 100 * time.Millisecond
		// The clock below runs as fast as a loop can advance it, days
		// of it in a second: offset expiry, which has tests of its own,
		// must not empty a group that is only between members.
		c.OffsetsRetention = 100 * 365 * 24 * time.Hour
	})
	const groups, members, iterations = 4, 4, 60
	var clients []*client
	for g := range groups {
		for m := range members {
			clients = append(clients, &client{h: h, group: fmt.Sprintf("g%d", g), index: m})
		}
	}

	var done atomic.Bool
	var side sync.WaitGroup
	side.Add(2)
	go func() { // time passes: timers fire while requests run
		defer side.Done()
		for !done.Load() {
			h.clock.Advance(50 * time.Millisecond)
		}
	}()
	go func() { // admin readers
		defer side.Done()
		for !done.Load() {
			for _, l := range h.list(nil) {
				h.c.DescribeGroup(l.Group)
				h.c.FetchOffsets(l.Group, nil, false)
			}
		}
	}()

	errs := make(chan error, len(clients))
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.run(iterations)
		}()
	}
	wg.Wait()
	done.Store(true)
	side.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	if n := h.log.overlapCount(); n != 0 {
		t.Fatalf("%d overlapping appends for one group", n)
	}
	var commits int64
	for _, c := range clients {
		commits += c.committed
		if got := h.committed(c.group, tp("t", int32(c.index))); got != c.committed && !(got == -1 && c.committed == 0) {
			t.Fatalf("%s member %d: committed %d, last successful commit %d", c.group, c.index, got, c.committed)
		}
	}
	if commits == 0 {
		t.Fatal("no commit succeeded")
	}
	// Wait for background writes (the groups becoming Empty) to land
	// before reading the log back. Time must keep passing meanwhile, and
	// fast: a group whose last member left while its initial rebalance
	// delay was running becomes Empty only when that timer fires, and a
	// member its client forgot (after an error) only when its minute-long
	// session runs out.
	// A group none of whose commits succeeded (possible when the clients
	// churn hard, as on a loaded machine) holds no offsets once Empty, and
	// the retention check then removes it and tombstones its metadata,
	// as Kafka does: that is the other right ending.
	removed := map[string]bool{}
	h.eventually(func() error {
		h.clock.Advance(5 * time.Second)
		for g := range groups {
			id := fmt.Sprintf("g%d", g)
			recs := h.groupRecords(id)
			if len(recs) == 0 {
				return fmt.Errorf("%s wrote nothing", id)
			}
			last := recs[len(recs)-1]
			switch {
			case last.kind == "group" && last.tombstone:
				if offsets, _ := h.c.FetchOffsets(id, nil, false); len(offsets) != 0 {
					return fmt.Errorf("%s was removed with %d offsets", id, len(offsets))
				}
				removed[id] = true
			case last.metadata == nil || len(last.metadata.Members) != 0:
				return errors.New("empty groups not written yet")
			}
		}
		return nil
	})
	h2 := h.reload()
	for g := range groups {
		id := fmt.Sprintf("g%d", g)
		a, _ := h.c.FetchOffsets(id, nil, false)
		b, _ := h2.c.FetchOffsets(id, nil, false)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s offsets served %+v, loaded %+v", id, a, b)
		}
		if removed[id] {
			h2.wantState(id, "Dead")
		} else {
			h2.wantState(id, "Empty")
		}
	}
}
