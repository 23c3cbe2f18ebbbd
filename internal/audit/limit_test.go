package audit

import (
	"fmt"
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

// The class, principal and host together make a key: the same principal
// from another host, another principal from the same host, or the same
// principal and host in another class has its own bucket.
func TestLimiterKeys(t *testing.T) {
	l := testLimiter(t, Config{ClientRate: 1, ClientBurst: 1})
	for _, k := range []limitKey{
		{classDenial, "User:a", "h1"}, {classDenial, "User:a", "h2"}, {classDenial, "User:b", "h1"},
		{classDenial, "User:ah", "1"}, {classSuccess, "User:a", "h1"},
	} {
		if ok, _ := l.allow(t0, k); !ok {
			t.Errorf("%v: refused, want its own bucket", k)
		}
	}
	if ok, clientOver := l.allow(t0, limitKey{classDenial, "User:a", "h1"}); ok || !clientOver {
		t.Errorf("a's second denial from h1: ok %v, client over %v", ok, clientOver)
	}
}

// An IPv4 client is keyed by its address, an IPv6 one by its /64 (zone
// and port dropped, an IPv4-mapped one as IPv4), and a host that is not
// an address as it is.
func TestClientHost(t *testing.T) {
	for _, tc := range []struct{ client, want string }{
		{"10.0.0.1:5000", "10.0.0.1"},
		{"10.0.0.1", "10.0.0.1"},
		{"[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:5000", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::1]:1", "2001:db8:1:2::/64"},
		{"[2001:db8:1:3::1]:1", "2001:db8:1:3::/64"},
		{"2001:db8:1:2::7", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::7]", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:9092", "fe80::/64"},
		{"[::ffff:10.0.0.1]:5000", "10.0.0.1"},
		{"[::1]:80", "::/64"},
		{"example.com:80", "example.com"},
		{"", ""},
	} {
		if got := clientHost(tc.client); got != tc.want {
			t.Errorf("clientHost(%q) = %q, want %q", tc.client, got, tc.want)
		}
	}
}

// Failures and denials share a budget of Rate and Burst, a quarter
// reserved for each: a flood of either from more keys than the key
// buckets can hold back takes three quarters and no more, the other
// class keeps its reserve, and successes, with their own budget, are
// untouched either way.
func TestLimiterReserves(t *testing.T) {
	for _, flood := range []class{classFailure, classDenial} {
		other := classFailure + classDenial - flood
		l := testLimiter(t, Config{Rate: 100, Burst: 100, ClientRate: 1, ClientBurst: 10})
		admitted := 0
		for i := range 1000 {
			if ok, _ := l.allow(t0, limitKey{flood, "", fmt.Sprintf("10.0.%d.%d", i/256, i%256)}); ok {
				admitted++
			}
		}
		if admitted != 75 {
			t.Errorf("a flood of class %d from 1,000 hosts: %d admitted, want 75 (its reserve 25, the shared 50)", flood, admitted)
		}
		for i := range 26 {
			ok, _ := l.allow(t0, limitKey{other, fmt.Sprintf("User:u%d", i), "10.1.0.1"})
			if want := i < 25; ok != want {
				t.Errorf("class %d event %d during the flood: ok %v, want %v (its reserve of 25)", other, i, ok, want)
			}
		}
		for i := range 100 {
			if ok, _ := l.allow(t0, limitKey{classSuccess, fmt.Sprintf("User:s%d", i), "10.2.0.1"}); !ok {
				t.Fatalf("success %d refused: the flood spent the successes' budget", i)
			}
		}
		// A second on, the shared half refills by 50 and the reserves by
		// 25: the flood gets 75 again.
		admitted = 0
		for i := range 1000 {
			if ok, _ := l.allow(t0.Add(time.Second), limitKey{flood, "", fmt.Sprintf("10.3.%d.%d", i/256, i%256)}); ok {
				admitted++
			}
		}
		if admitted != 75 {
			t.Errorf("a second on, class %d: %d admitted, want 75", flood, admitted)
		}
	}
}

// Successes have a budget of their own: a flood of them from many keys
// leaves the failures' and denials' whole.
func TestLimiterSuccessesApart(t *testing.T) {
	l := testLimiter(t, Config{Rate: 10, Burst: 10})
	for i := range 1000 {
		l.allow(t0, limitKey{classSuccess, fmt.Sprintf("User:u%d", i), "10.0.0.1"})
	}
	for i := range 10 {
		k := limitKey{classDenial, fmt.Sprintf("User:d%d", i), "10.0.0.1"}
		if i%2 == 1 {
			k = limitKey{classFailure, "", fmt.Sprintf("10.0.0.%d", i)}
		}
		if ok, _ := l.allow(t0, k); !ok {
			t.Errorf("%v refused after a flood of successes", k)
		}
	}
}

// droppers names the keys that dropped the most, most first, with a
// count each is sure of: exact while there are few keys, and a flooder
// hidden among more decoys than counters is still found.
func TestDroppers(t *testing.T) {
	var d droppers
	if top := d.top(); top != nil {
		t.Errorf("no drops: top %v", top)
	}
	for range 5 {
		d.add(limitKey{classDenial, "User:b", "h2"})
	}
	for range 7 {
		d.add(limitKey{classFailure, "", "h1"})
	}
	d.add(limitKey{classDenial, "User:b", "h2"})
	d.add(limitKey{classSuccess, "User:b", "h2"}) // the class is not part of it
	d.add(limitKey{classDenial, "User:c", "h3"})
	d.add(limitKey{classDenial, "User:d", "h4"})
	want := []droppedKey{{Host: "h1", Count: 7}, {Principal: "User:b", Host: "h2", Count: 7}, {Principal: "User:c", Host: "h3", Count: 1}}
	if got := d.top(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("top %v, want %v", got, want)
	}

	d.reset()
	for i := range 3 * maxDroppers {
		d.add(limitKey{classFailure, "", fmt.Sprintf("decoy%d", i)})
	}
	for range 500 {
		d.add(limitKey{classFailure, "", "flooder"})
	}
	for i := range 3 * maxDroppers {
		d.add(limitKey{classFailure, "", fmt.Sprintf("late%d", i)})
	}
	top := d.top()
	if len(top) != topDroppers || top[0].Host != "flooder" || top[0].Count < 490 || top[0].Count > 500 {
		t.Errorf("top %v, want the flooder first with about 500 (at most 500)", top)
	}
}
