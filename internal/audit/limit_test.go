package audit

import (
	"testing"
	"time"
)

func testLimiter(t *testing.T, cfg Config) *limiter {
	t.Helper()
	cfg, err := cfg.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return newLimiter(t0, cfg)
}

// A bucket refills at its rate up to its burst, and a clock that goes
// back neither adds tokens nor lets them be earned twice.
func TestBucket(t *testing.T) {
	b := fullBucket(t0, 2)
	for i, want := range []bool{true, true, false} {
		if got := b.take(t0, 1, 2); got != want {
			t.Fatalf("take %d at once: %v, want %v", i, got, want)
		}
	}
	if b.take(t0.Add(999*time.Millisecond), 1, 2) {
		t.Error("a token before a second at 1/s")
	}
	if !b.take(t0.Add(time.Second), 1, 2) {
		t.Error("no token after a second at 1/s")
	}
	if b.take(t0.Add(-time.Hour), 1, 2) {
		t.Error("a clock an hour back gave a token")
	}
	if b.take(t0.Add(1500*time.Millisecond), 1, 2) {
		t.Error("the time before the clock went back was counted twice")
	}
	if !b.take(t0.Add(time.Hour), 1, 2) || !b.take(t0.Add(time.Hour), 1, 2) || b.take(t0.Add(time.Hour), 1, 2) {
		t.Error("an hour idle did not refill to exactly the burst")
	}
}

// The key map never holds more than MaxClients: keys past it share one
// overflow bucket until a sweep forgets the keys that went idle (whose
// buckets are full again), and an idle map is swept anyway.
func TestLimiterKeysBounded(t *testing.T) {
	l := testLimiter(t, Config{MaxClients: 3, ClientRate: 1, ClientBurst: 2, Rate: 1e6, Burst: 1e6})
	for _, h := range []string{"a", "b", "c"} {
		if ok, _ := l.allow(t0, limitKey{host: h}); !ok {
			t.Fatalf("first event of %s refused", h)
		}
	}
	// d and e find the map full of buckets in use: they share the
	// overflow bucket's 2 tokens.
	for i, k := range []string{"d", "d", "e"} {
		ok, clientOver := l.allow(t0, limitKey{host: k})
		if want := i < 2; ok != want || clientOver == want {
			t.Errorf("overflow event %d (%s): ok %v, client over %v; want ok %v", i, k, ok, clientOver, want)
		}
	}
	if len(l.keys) != 3 {
		t.Fatalf("%d keys, want 3", len(l.keys))
	}
	// c is used again at 1.5 s; two seconds on, a and b are full again
	// and c is not: the next new key sweeps a and b away and gets a
	// bucket of its own, and c keeps its (half-spent) one.
	l.allow(t0.Add(1500*time.Millisecond), limitKey{host: "c"})
	later := t0.Add(2 * time.Second)
	if ok, _ := l.allow(later, limitKey{host: "f"}); !ok || len(l.keys) != 2 {
		t.Errorf("after the sweep: ok %v, %d keys; want f admitted beside c", ok, len(l.keys))
	}
	if l.keyBucket(later, limitKey{host: "c"}).full(later, 1, 2) {
		t.Error("c's bucket was swept away while in use")
	}
	// An idle map is swept after a minute, full or not.
	if ok, _ := l.allow(later.Add(time.Minute), limitKey{host: "h"}); !ok || len(l.keys) != 1 {
		t.Errorf("a minute on: %d keys, want only h (c and f idle and full again)", len(l.keys))
	}
}

// The principal and host together make a key: the same principal from
// another host, or another principal from the same host, has its own
// bucket.
func TestLimiterKeys(t *testing.T) {
	l := testLimiter(t, Config{ClientRate: 1, ClientBurst: 1})
	for _, k := range []limitKey{{"User:a", "h1"}, {"User:a", "h2"}, {"User:b", "h1"}, {"User:ah", "1"}} {
		if ok, _ := l.allow(t0, k); !ok {
			t.Errorf("%v: refused, want its own bucket", k)
		}
	}
	if ok, clientOver := l.allow(t0, limitKey{"User:a", "h1"}); ok || !clientOver {
		t.Errorf("a's second event from h1: ok %v, client over %v", ok, clientOver)
	}
}
