package httpapi

import (
	"testing"
	"time"
)

// A closed instance is never handed to a request that looked it up
// before the close: lockLive answers nil, and the instance says closed,
// which consume checks under its lock.
func TestClosedInstanceIsNotUsed(t *testing.T) {
	c := newConsumers([]string{"127.0.0.1:1"}, time.Hour, DefaultConsumerSessionTimeout, 10) // the client dials lazily: nothing listens
	defer c.close()
	key := instanceKey{group: "g", topic: "t"}
	in, err := c.get(key, false)
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
