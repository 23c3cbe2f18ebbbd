package replica

import (
	"slices"
	"testing"
	"time"
)

// A caught-up follower joins the ISR only while its broker is in
// service (KIP-841): the controller refuses a fenced or shutting-down
// one, and a leader that asked anyway would ask again at every fetch.
// Members already in the ISR are not dropped for it (the controller's
// fence and controlled shutdown take them out).
func TestISRChangeSkipsBrokersOutOfService(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	var f followers
	f.resetLocked(3, now)
	f.recordFetch(3, 2, 10, 100, 100, now)
	f.recordFetch(3, 3, 10, 100, 100, now)
	all := func(int32) bool { return true }
	not3 := func(id int32) bool { return id != 3 }
	if got := f.isrChange(1, []int32{1, 2, 3}, []int32{1}, 100, 0, time.Minute, now, all); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("both caught up and in service: %v, want [1 2 3]", got)
	}
	if got := f.isrChange(1, []int32{1, 2, 3}, []int32{1}, 100, 0, time.Minute, now, not3); !slices.Equal(got, []int32{1, 2}) {
		t.Fatalf("3 out of service: %v, want [1 2]", got)
	}
	if got := f.isrChange(1, []int32{1, 2, 3}, []int32{1, 3}, 100, 0, time.Minute, now, not3); !slices.Equal(got, []int32{1, 2, 3}) {
		t.Fatalf("3 out of service but already a member: %v, want [1 2 3]", got)
	}
}
