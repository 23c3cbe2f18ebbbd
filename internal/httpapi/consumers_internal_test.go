package httpapi

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A closed instance is never handed to a request that looked it up
// before the close: lockLive answers nil, and the instance says closed,
// which consume checks under its lock.
func TestClosedInstanceIsNotUsed(t *testing.T) {
	c := newConsumers([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, time.Hour, DefaultConsumerSessionTimeout, 10, newAPIMetrics(nil)) // the client dials lazily: nothing listens
	defer c.close()
	key := instanceKey{group: "g", topic: "t"}
	in, err := c.get(key, instanceStart{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.lockLive(key); got != in {
		t.Fatalf("lockLive before the close: %p, want %p", got, in)
	} else {
		got.mu.Unlock()
	}
	if !c.remove(key) {
		t.Fatal("remove found no instance")
	}
	if c.remove(key) {
		t.Fatal("remove found the instance twice")
	}
	in.mu.Lock()
	closed := in.closed
	in.mu.Unlock()
	if !closed {
		t.Fatal("a removed instance does not say closed")
	}
	if got := c.lockLive(key); got != nil {
		t.Fatalf("lockLive after the close: %p, want nil", got)
	}
}

// A running instance's isolation is what it started with: a consume
// naming the other level is refused with 409 isolation_mismatch and gets
// no instance (the handler returns before it touches one), one naming
// none or the same level gets the running instance, and another
// consumer id of the same group may read at the other level.
func TestInstanceIsolationIsFixedAtStart(t *testing.T) {
	c := newConsumers([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, time.Hour, DefaultConsumerSessionTimeout, 10, newAPIMetrics(nil)) // the client dials lazily: nothing listens
	defer c.close()
	key := instanceKey{group: "g", topic: "t"}
	committed := instanceStart{isolation: readCommitted, isolationNamed: true}
	in, err := c.get(key, committed)
	if err != nil {
		t.Fatal(err)
	}
	if in.isolation != readCommitted {
		t.Fatalf("started at %v, want read_committed", in.isolation)
	}
	for _, start := range []instanceStart{committed, {}, {earliest: true}} {
		if got, err := c.get(key, start); err != nil || got != in {
			t.Fatalf("get(%+v) = %p, %v; want the running instance %p", start, got, err, in)
		}
	}
	got, err := c.get(key, instanceStart{isolation: readUncommitted, isolationNamed: true})
	var ae *apiError
	if got != nil || !errors.As(err, &ae) || ae.status != http.StatusConflict || ae.code != "isolation_mismatch" {
		t.Fatalf("get naming read_uncommitted on a read_committed instance: %p, %v; want nil and 409 isolation_mismatch", got, err)
	}
	if c.lookup(key) != in || len(c.m) != 1 {
		t.Fatalf("a refused get changed the instances: %v", c.m)
	}
	other, err := c.get(instanceKey{group: "g", topic: "t", consumer: "b"}, instanceStart{isolation: readUncommitted, isolationNamed: true})
	if err != nil || other.isolation != readUncommitted {
		t.Fatalf("another consumer id at read_uncommitted: %v, %v", other, err)
	}
}
