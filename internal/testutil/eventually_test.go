package testutil

import (
	"errors"
	"testing"
	"time"
)

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	calls := 0
	Eventually(t, 10*time.Second, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("cond called %d times, want 3", calls)
	}
}

// recorder is a testing.TB that records a Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r) // Fatalf must not return
}

func TestEventuallyFailsPastTheDeadline(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("recovered %v, want the recorder's Fatalf", p)
			}
		}()
		Eventually(r, 20*time.Millisecond, func() error { return errors.New("never") })
	}()
	if r.failed == "" {
		t.Fatal("Eventually returned without failing the test")
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if v := Receive(t, 10*time.Second, "the value", ch); v != 7 {
		t.Fatalf("received %d, want 7", v)
	}
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("recovered %v, want the recorder's Fatalf", p)
			}
		}()
		Receive(r, 20*time.Millisecond, "nothing", ch)
	}()
	if r.failed == "" {
		t.Fatal("Receive returned without failing the test")
	}
}
