package quota

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func lookupIn(q map[metadata.QuotaEntity]map[string]float64) Lookup {
	return func(e metadata.QuotaEntity, key string) (float64, bool) {
		v, ok := q[e][key]
		return v, ok
	}
}

func TestResolvePrecedence(t *testing.T) {
	u, c := metadata.Named("alice"), metadata.Named("app")
	du, dc := metadata.DefaultName(), metadata.DefaultName()
	levels := []metadata.QuotaEntity{
		{User: u, ClientID: c},
		{User: u, ClientID: dc},
		{User: u},
		{User: du, ClientID: c},
		{User: du, ClientID: dc},
		{User: du},
		{ClientID: c},
		{ClientID: dc},
	}
	// The rate each level's match draws on, for alice's "app".
	tags := []SensorKey{
		{User: "alice", ClientID: "app"}, {User: "alice", ClientID: "app"}, {User: "alice"},
		{User: "alice", ClientID: "app"}, {User: "alice", ClientID: "app"}, {User: "alice"},
		{ClientID: "app"}, {ClientID: "app"},
	}
	// With levels i..7 set (each to its own value), level i wins.
	for i := range levels {
		q := map[metadata.QuotaEntity]map[string]float64{}
		for j := i; j < len(levels); j++ {
			q[levels[j]] = map[string]float64{metadata.QuotaProducerByteRate: float64(j + 1)}
		}
		limit, s, ok := Resolve(lookupIn(q), ProduceBytes, Client{User: "alice", ClientID: "app"})
		want := tags[i]
		want.Kind = ProduceBytes
		if !ok || limit != float64(i+1) || s != want {
			t.Errorf("levels %d..7 set: limit %v sensor %+v ok %v; want %d and %+v", i, limit, s, ok, i+1, want)
		}
	}
	// Another key, or nothing covering the client: no quota.
	q := map[metadata.QuotaEntity]map[string]float64{{ClientID: c}: {metadata.QuotaProducerByteRate: 5}}
	if _, _, ok := Resolve(lookupIn(q), FetchBytes, Client{User: "alice", ClientID: "app"}); ok {
		t.Error("a produce quota resolved for fetches")
	}
	if _, _, ok := Resolve(lookupIn(q), ProduceBytes, Client{User: "alice", ClientID: "other"}); ok {
		t.Error("client-id=app's quota resolved for client other")
	}
	// A quota on a client id binds every user's connections with it
	// together; one on client-id=<default> each client id on its own.
	_, s1, _ := Resolve(lookupIn(q), ProduceBytes, Client{User: "bob", ClientID: "app"})
	_, s2, _ := Resolve(lookupIn(q), ProduceBytes, Client{User: "alice", ClientID: "app"})
	if s1 != s2 {
		t.Errorf("client-id=app: bob draws on %+v, alice on %+v; want one rate", s1, s2)
	}
}

// A client that honours its throttles, sending as fast as it may, is
// held to its quota: over 30 s of a 1 MB/s quota it sends within 10% of
// 30 MB (and the first window's burst is all it gains).
func TestThrottledClientHeldToQuota(t *testing.T) {
	for _, chunk := range []float64{16 << 10, 1 << 20, 4 << 20} {
		t.Run(fmt.Sprint(chunk), func(t *testing.T) {
			clock := newClock()
			m := New(Config{Now: clock.now})
			const limit = 1 << 20
			s := SensorKey{Kind: ProduceBytes, ClientID: "fast"}
			start := clock.t
			var sent float64
			throttled := 0
			for clock.t.Sub(start) < 30*time.Second {
				sent += chunk
				if d := m.Record(s, limit, chunk); d > 0 {
					throttled++
					clock.add(d)
				}
				clock.add(time.Millisecond) // the request's own time
			}
			rate := sent / clock.t.Sub(start).Seconds()
			t.Logf("chunk %.0f: %.0f bytes/s over %v, %d throttles", chunk, rate, clock.t.Sub(start), throttled)
			if math.Abs(rate-limit)/limit > 0.10 {
				t.Fatalf("%.0f bytes/s over 30 s with a %d quota", rate, limit)
			}
			if throttled == 0 {
				t.Fatal("never throttled")
			}
		})
	}
}

// A client within its quota is never throttled; one over it owes the
// time its debt takes to pay back at the quota.
func TestThrottleOwed(t *testing.T) {
	clock := newClock()
	m := New(Config{Now: clock.now})
	s := SensorKey{Kind: FetchBytes, ClientID: "c"}
	for range 20 {
		if d := m.Record(s, 1000, 500); d != 0 {
			t.Fatalf("throttled at half the quota: %v", d)
		}
		clock.add(time.Second)
	}
	// The bucket is full (one second of quota, 1,000): 3,000 more is a
	// debt of 2,000, two seconds at 1,000/s.
	if d := m.Record(s, 1000, 3000); d != 2*time.Second {
		t.Fatalf("throttle %v, want 2s", d)
	}
	if got := m.Check(s, 1000); got != 2*time.Second {
		t.Fatalf("Check %v, want the same 2s without charging", got)
	}
	clock.add(500 * time.Millisecond)
	if got := m.Check(s, 1000); got != 1500*time.Millisecond {
		t.Fatalf("Check half a second later: %v, want 1.5s", got)
	}
	m.Unrecord(s, 1000, 3000)
	if got := m.Check(s, 1000); got != 0 {
		t.Fatalf("after Unrecord: %v, want 0", got)
	}
	// Far over: capped at the whole window.
	if d := m.Record(s, 1, 1e12); d != m.MaxThrottle() {
		t.Fatalf("throttle %v far over the quota, want the cap %v", d, m.MaxThrottle())
	}
	// Controller mutations burst the whole window (KIP-599): a topic of
	// 50 partitions at 5 a second goes through, the next mutation waits.
	cm := SensorKey{Kind: ControllerMutations, ClientID: "admin"}
	if d := m.Record(cm, 5, 50); d != 0 {
		t.Fatalf("50 mutations at 5/s with an 11 s burst: throttled %v", d)
	}
	if d := m.Record(cm, 5, 10); d != time.Second {
		t.Fatalf("10 more: throttle %v, want 1s", d)
	}
}

// A client idle for longer than the window starts afresh.
func TestIdleClientStartsAfresh(t *testing.T) {
	clock := newClock()
	m := New(Config{Now: clock.now})
	s := SensorKey{Kind: ProduceBytes, ClientID: "c"}
	m.Record(s, 100, 1e6)
	clock.add(12 * time.Second)
	if d := m.Record(s, 100, 10); d != 0 {
		t.Fatalf("throttled %v after 12 s idle", d)
	}
}

// The rates kept are bounded: a flood of client ids evicts the least
// recently used.
func TestSensorsBounded(t *testing.T) {
	clock := newClock()
	m := New(Config{Now: clock.now, MaxSensors: 1000})
	for i := range 50_000 {
		m.Record(SensorKey{Kind: ProduceBytes, ClientID: fmt.Sprint(i)}, 100, 1)
		clock.add(time.Microsecond)
	}
	if n := m.Sensors(); n > 1000 {
		t.Fatalf("%d sensors kept, want at most 1000", n)
	}
	if _, ok := m.sensors[SensorKey{Kind: ProduceBytes, ClientID: "49999"}]; !ok {
		t.Fatal("the newest sensor was evicted")
	}
}
