// Package quota enforces client quotas on one node as Kafka's brokers
// do, as clients see it: a rate per quota entity, and a throttle time for
// a client over its quota, which the protocol server puts in the
// response (throttle_time_ms) and honours by reading nothing more from
// the connection for that long (KIP-219). The rate is a token bucket
// rather than Kafka's sampled rate (sensor, below, says why).
//
// Quotas hold per node, as Kafka's do: a client id with a 1 MB/s produce
// quota may write 1 MB/s to each node it talks to.
//
// Which quota applies to a request is Kafka's rule (its default quota
// callback): the most specific of eight entities that has the key set,
//
//	user=U,client-id=C   user=U,client-id=<default>   user=U
//	user=<default>,client-id=C   user=<default>,client-id=<default>   user=<default>
//	client-id=C   client-id=<default>
//
// and the rate is shared by every connection the matched entity covers:
// a quota set on user=U binds all of U's clients together, a quota set
// on client-id=<default> binds each client id on its own.
//
// The package knows nothing of the wire or the metadata log; it is
// given the quotas in force (Lookup) at each call.
package quota

import (
	"math"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Kafka's quota.window.num and quota.window.size.seconds.
const (
	DefaultSamples = 11
	DefaultWindow  = time.Second
)

// DefaultMaxSensors bounds the rates kept; past it the least recently
// used go. Each is a few hundred bytes.
const DefaultMaxSensors = 100_000

// sensorIdle is how long an unused rate is kept (Kafka's sensors expire
// after an hour of inactivity).
const sensorIdle = time.Hour

// Kind is what a quota measures.
type Kind uint8

const (
	// ProduceBytes is producer_byte_rate: bytes of produce requests.
	ProduceBytes Kind = iota
	// FetchBytes is consumer_byte_rate: bytes of fetch responses.
	FetchBytes
	// RequestTime is request_percentage: handler time, in percent of one
	// core (a rate of 100 is one core busy all the time).
	RequestTime
	// ControllerMutations is controller_mutation_rate: partitions
	// created or deleted per second (KIP-599).
	ControllerMutations
	// ConnectionCreations is connection_creation_rate: connections
	// accepted from one IP address per second (KIP-612; ResolveIP).
	ConnectionCreations
)

// key is the metadata log's name for a kind's quota.
func (k Kind) key() string {
	switch k {
	case ProduceBytes:
		return metadata.QuotaProducerByteRate
	case FetchBytes:
		return metadata.QuotaConsumerByteRate
	case RequestTime:
		return metadata.QuotaRequestPercentage
	case ConnectionCreations:
		return metadata.QuotaConnectionCreationRate
	}
	return metadata.QuotaControllerMutationRate
}

func (k Kind) String() string { return k.key() }

// Lookup returns the value of a quota key set on exactly entity e
// (metadata.Image.ClientQuota).
type Lookup func(e metadata.QuotaEntity, key string) (float64, bool)

// Client is who sent a request.
type Client struct {
	// User is the principal's name; "ANONYMOUS" without authentication,
	// as Kafka names it.
	User     string
	ClientID string
}

// Anonymous is Kafka's principal name for a connection that did not
// authenticate (every connection until Fjord has SASL and TLS).
const Anonymous = "ANONYMOUS"

// Resolve finds the quota of kind for c: its limit and the rate it draws
// on. ok is false when no entity that covers c has the key set.
func Resolve(lookup Lookup, kind Kind, c Client) (limit float64, s SensorKey, ok bool) {
	key := kind.key()
	user, dUser := metadata.Named(c.User), metadata.DefaultName()
	client, dClient := metadata.Named(c.ClientID), metadata.DefaultName()
	none := metadata.QuotaName{}
	for _, m := range [...]struct {
		e        metadata.QuotaEntity
		user, cl bool // the rate's tags: by user, by client id
	}{
		{e: metadata.QuotaEntity{User: user, ClientID: client}, user: true, cl: true},
		{e: metadata.QuotaEntity{User: user, ClientID: dClient}, user: true, cl: true},
		{e: metadata.QuotaEntity{User: user, ClientID: none}, user: true},
		{e: metadata.QuotaEntity{User: dUser, ClientID: client}, user: true, cl: true},
		{e: metadata.QuotaEntity{User: dUser, ClientID: dClient}, user: true, cl: true},
		{e: metadata.QuotaEntity{User: dUser, ClientID: none}, user: true},
		{e: metadata.QuotaEntity{User: none, ClientID: client}, cl: true},
		{e: metadata.QuotaEntity{User: none, ClientID: dClient}, cl: true},
	} {
		v, found := lookup(m.e, key)
		if !found {
			continue
		}
		s = SensorKey{Kind: kind}
		if m.user {
			s.User = c.User
		}
		if m.cl {
			s.ClientID = c.ClientID
		}
		return v, s, true
	}
	return 0, SensorKey{}, false
}

// ResolveIP finds addr's connection_creation_rate: its own (ip=addr),
// else the default (ip=<default>). Either way the rate is addr's own.
func ResolveIP(lookup Lookup, addr string) (limit float64, s SensorKey, ok bool) {
	for _, e := range [...]metadata.QuotaEntity{{IP: metadata.Named(addr)}, {IP: metadata.DefaultName()}} {
		if v, found := lookup(e, metadata.QuotaConnectionCreationRate); found {
			return v, SensorKey{Kind: ConnectionCreations, ClientID: addr}, true
		}
	}
	return 0, SensorKey{}, false
}

// SensorKey names one rate: a kind and the tags of the entity that
// matched.
type SensorKey struct {
	Kind     Kind
	User     string
	ClientID string
}

// Config configures a Manager.
type Config struct {
	// Samples and Window are quota.window.num and
	// quota.window.size.seconds. Zero: Kafka's 11 and 1 s.
	Samples int
	Window  time.Duration
	// MaxSensors bounds the rates kept. Zero: DefaultMaxSensors.
	MaxSensors int
	// Now is the clock. nil: time.Now.
	Now func() time.Time
}

// Manager keeps the rates of one node's clients.
type Manager struct {
	cfg Config
	mu  sync.Mutex
	// sensors are the rates by key; guarded by mu.
	sensors map[SensorKey]*sensor
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.Samples < 2 {
		cfg.Samples = DefaultSamples
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MaxSensors <= 0 {
		cfg.MaxSensors = DefaultMaxSensors
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Manager{cfg: cfg, sensors: map[SensorKey]*sensor{}}
}

// Window is quota.window.size.seconds: a byte rate's burst is one.
func (m *Manager) Window() time.Duration { return m.cfg.Window }

// MaxThrottle is the longest throttle the manager answers: the whole
// window. A client far over its quota waits this long and tries again,
// rather than being told to go away for minutes.
func (m *Manager) MaxThrottle() time.Duration { return time.Duration(m.cfg.Samples) * m.cfg.Window }

// Record charges value to the rate s (found by Resolve, with its limit)
// and returns how long the client must wait until it is within its quota
// again: 0 while it is.
func (m *Manager) Record(s SensorKey, limit, value float64) time.Duration {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	sn := m.sensorLocked(s, limit, now)
	sn.refill(limit, m.burst(s.Kind, limit), now)
	// A debt is owed for at most the whole window, as the throttle is: a
	// client far over its quota waits that long and is then measured
	// afresh, as Kafka's samples expire.
	sn.tokens = max(sn.tokens-value, -limit*m.MaxThrottle().Seconds())
	return m.owed(sn, limit)
}

// Unrecord gives value back to the rate s: a fetch answered empty
// because it was throttled did not send what was charged.
func (m *Manager) Unrecord(s SensorKey, limit, value float64) {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if sn, ok := m.sensors[s]; ok {
		sn.refill(limit, m.burst(s.Kind, limit), now)
		sn.tokens = min(sn.tokens+value, m.burst(s.Kind, limit))
	}
}

// Check returns the wait s owes now without charging anything: the
// strict check of KIP-599's controller mutations, made before a request
// that would mutate, which is refused while its client owes one.
func (m *Manager) Check(s SensorKey, limit float64) time.Duration {
	now := m.cfg.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	sn, ok := m.sensors[s]
	if !ok {
		return 0
	}
	sn.refill(limit, m.burst(s.Kind, limit), now)
	return m.owed(sn, limit)
}

// Sensors is the number of rates kept.
func (m *Manager) Sensors() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sensors)
}

// burst is what a client may send at once before it owes a wait: one
// window of its quota, and for controller mutations the whole window
// (KIP-599's token bucket), so a tool creating a topic of many
// partitions is not refused outright.
func (m *Manager) burst(k Kind, limit float64) float64 {
	if k == ControllerMutations {
		return limit * m.MaxThrottle().Seconds()
	}
	return limit * m.cfg.Window.Seconds()
}

// owed is the time until sn's debt is paid back at limit per second.
func (m *Manager) owed(sn *sensor, limit float64) time.Duration {
	if sn.tokens >= 0 || limit <= 0 {
		return 0
	}
	t := -sn.tokens / limit * float64(time.Second)
	if max := float64(m.MaxThrottle()); t > max || math.IsNaN(t) {
		return m.MaxThrottle()
	}
	return time.Duration(t)
}

// sensorLocked returns s's sensor, making it (and making room for it by
// dropping idle or least recently used ones) if needed.
func (m *Manager) sensorLocked(s SensorKey, limit float64, now time.Time) *sensor {
	if sn, ok := m.sensors[s]; ok {
		sn.used = now
		return sn
	}
	if len(m.sensors) >= m.cfg.MaxSensors {
		m.evictLocked(now)
	}
	sn := &sensor{tokens: m.burst(s.Kind, limit), last: now, used: now}
	m.sensors[s] = sn
	return sn
}

// evictLocked drops the sensors idle for sensorIdle, or else the least
// recently used tenth. It runs only when the map is full, so its cost is
// spread over the insertions that filled it.
func (m *Manager) evictLocked(now time.Time) {
	for k, sn := range m.sensors {
		if now.Sub(sn.used) >= sensorIdle {
			delete(m.sensors, k)
		}
	}
	if len(m.sensors) < m.cfg.MaxSensors {
		return
	}
	var cut time.Time
	ages := make([]time.Time, 0, len(m.sensors))
	for _, sn := range m.sensors {
		ages = append(ages, sn.used)
	}
	cut = nthOldest(ages, max(len(ages)/10, 1))
	for k, sn := range m.sensors {
		if !sn.used.After(cut) {
			delete(m.sensors, k)
		}
	}
}

// nthOldest returns the n-th smallest time in ts (1-based), by
// selection; ts is reordered.
func nthOldest(ts []time.Time, n int) time.Time {
	lo, hi, k := 0, len(ts)-1, n-1
	for lo < hi {
		p := ts[(lo+hi)/2]
		i, j := lo, hi
		for i <= j {
			for ts[i].Before(p) {
				i++
			}
			for p.Before(ts[j]) {
				j--
			}
			if i <= j {
				ts[i], ts[j] = ts[j], ts[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return ts[k]
		}
	}
	return ts[k]
}

// sensor is one rate's token bucket: it fills at the quota, up to the
// burst, and each request takes what it costs, going into debt when it
// costs more than there is; the debt over the quota is the wait.
//
// Kafka measures a rate over Samples windows instead and throttles by
// (rate - quota) / quota times the span measured. That lets a new
// client send ten windows of its quota at once, and a steady one run
// about a tenth over (the span counts the window being filled as
// whole): a 1 MB/s quota measured over 30 s came to 1.15 to 1.29 MB/s
// in this package's test of it. The bucket holds a client to its quota
// plus one window's burst; clients see the same throttle_time_ms.
type sensor struct {
	tokens float64
	last   time.Time
	used   time.Time
}

func (sn *sensor) refill(limit, burst float64, now time.Time) {
	if d := now.Sub(sn.last); d > 0 {
		sn.tokens = min(sn.tokens+limit*d.Seconds(), burst)
		sn.last = now
	}
}
