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

// Instances are their principal's: the same group, topic and consumer
// id (the default "" included) are one instance per principal, and a
// principal may run a quarter of the node's bound (at least one), past
// which a new one is 429; User:ANONYMOUS, everyone on a node that does
// not authenticate, only the node's bound.
func TestInstancesPerPrincipal(t *testing.T) {
	c := newConsumers([]kgo.Opt{kgo.SeedBrokers("127.0.0.1:1")}, time.Hour, DefaultConsumerSessionTimeout, 8, newAPIMetrics(nil)) // the client dials lazily: nothing listens
	defer c.close()
	alice := instanceKey{principal: "User:alice", group: "g", topic: "t"}
	bob := instanceKey{principal: "User:bob", group: "g", topic: "t"}
	a, err := c.get(alice, instanceStart{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.get(bob, instanceStart{ackMode: ackRecords, ackModeNamed: true})
	if err != nil || b == a {
		t.Fatalf("bob's default instance: %p, %v; want one of his own (alice's is %p)", b, err, a)
	}
	if c.lookup(alice) != a || c.lookup(bob) != b {
		t.Fatal("each principal does not find its own instance")
	}
	if c.remove(instanceKey{principal: "User:bob", group: "g", topic: "t", consumer: "x"}) {
		t.Fatal("bob closed an instance he does not have")
	}
	// The cap: 8/4 = 2 each.
	if _, err := c.get(instanceKey{principal: "User:alice", group: "g", topic: "t", consumer: "2"}, instanceStart{}); err != nil {
		t.Fatalf("alice's second instance: %v", err)
	}
	_, err = c.get(instanceKey{principal: "User:alice", group: "g", topic: "t", consumer: "3"}, instanceStart{})
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusTooManyRequests || ae.code != "too_many_consumers" {
		t.Fatalf("alice's third instance (cap 2): %v, want 429 too_many_consumers", err)
	}
	if got, err := c.get(alice, instanceStart{}); err != nil || got != a {
		t.Fatalf("alice's running instance at her cap: %p, %v", got, err)
	}
	if _, err := c.get(instanceKey{principal: "User:bob", group: "g", topic: "t", consumer: "2"}, instanceStart{}); err != nil {
		t.Fatalf("bob's second instance while alice is at her cap: %v", err)
	}
	for i := range 4 { // 4 running: anonymous may take the node's other 4
		if _, err := c.get(instanceKey{principal: anonymous, group: "g", topic: "t", consumer: string(rune('a' + i))}, instanceStart{}); err != nil {
			t.Fatalf("anonymous instance %d: %v", i, err)
		}
	}
	if _, err := c.get(instanceKey{principal: anonymous, group: "g", topic: "t", consumer: "z"}, instanceStart{}); !errors.As(err, &ae) || ae.status != http.StatusTooManyRequests {
		t.Fatalf("past the node's bound: %v, want 429", err)
	}
	if got := perPrincipalMax(1); got != 1 {
		t.Fatalf("perPrincipalMax(1) = %d, want 1", got)
	}
}
