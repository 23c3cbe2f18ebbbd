package httpapi_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/testutil"
)

// A group with no committed offset starts at the log end, as `fjord
// consume --group` and Kafka's consumers do (auto.offset.reset=latest),
// or at the log start with auto_offset_reset=earliest. The gateway used
// franz-go's default, the start, so an HTTP group and a CLI group began
// in different places.
func TestConsumeStartsAtTheLogEndUnlessEarliest(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	e.produceN("t", 0, 3) // before any consume

	// Produce one record per try until the group reads: a record
	// produced before the instance found its position is past, under
	// latest, so only a loop can tell when it is there.
	var read []int64
	testutil.Eventually(t, 30*time.Second, func() error {
		e.produceN("t", 0, 1)
		var c consumed
		if st := e.do("GET", "/v1/topics/t/consume?group=late&timeout_ms=200", "", &c); st != 200 {
			return fmt.Errorf("consume: %d %+v", st, c)
		}
		for _, r := range c.Records {
			read = append(read, r.Offset)
		}
		if len(read) == 0 {
			return fmt.Errorf("nothing read yet")
		}
		return nil
	})
	if read[0] < 3 {
		t.Fatalf("a new group read %v: want none of the 3 records produced before it joined", read)
	}

	if early := e.consumeOffsets("/v1/topics/t/consume?group=early&auto_offset_reset=earliest&timeout_ms=200", 3); early[0] != 0 {
		t.Fatalf("with auto_offset_reset=earliest a new group read %v, want 0 first", early)
	}

	for _, bad := range []string{"EARLIEST", "smallest", "none", "earliest%00", "%E2%80%8Blatest"} {
		var res result
		if st := e.do("GET", "/v1/topics/t/consume?group=g&auto_offset_reset="+bad, "", &res); st != 400 || res.Error != "bad_auto_offset_reset" {
			t.Errorf("auto_offset_reset=%s: %d %+v, want 400 bad_auto_offset_reset", bad, st, res)
		}
	}
}

// The first consume says the instance is still joining its group
// (joining: true) rather than answering an empty list that reads as "no
// records"; once the group assigned it partitions, joining is false.
func TestConsumeSaysJoining(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	var first struct {
		consumed
		Joining *bool `json:"joining"`
	}
	// The group's first rebalance waits group.initial.rebalance.delay.ms
	// (3 s): an immediate answer comes before any assignment.
	if st := e.do("GET", "/v1/topics/t/consume?group=g&timeout_ms=0", "", &first); st != 200 || first.Joining == nil || !*first.Joining || len(first.Records) != 0 {
		t.Fatalf("first consume: %d %+v (joining %v), want 200, joining: true, no records", st, first, first.Joining)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		var c struct {
			consumed
			Joining *bool `json:"joining"`
		}
		if st := e.do("GET", "/v1/topics/t/consume?group=g&timeout_ms=200", "", &c); st != 200 || c.Joining == nil {
			return fmt.Errorf("consume: %d %+v", st, c)
		}
		if *c.Joining {
			return fmt.Errorf("still joining")
		}
		return nil
	})
}
