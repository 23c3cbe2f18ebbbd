package metadata

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Dynamic broker configs: the few broker settings an operator changes
// while the cluster runs, kept in the metadata log (BrokerConfigRecord)
// so every node sees the same. Everything else about a broker is static.
//
// Adding a name here needs no new metadata version, but a node of an
// older build refuses a BrokerConfigRecord naming it (ErrBadRecord) and
// stops its FSM, as at any record it cannot read: set a new config once
// every node runs the build that knows it.

// FollowerThrottleRateConfig is follower.replication.throttled.rate
// (Kafka's name): the bytes per second a broker's followers may copy
// for the replicas a reassignment is adding to it. Unset: no throttle.
const FollowerThrottleRateConfig = "follower.replication.throttled.rate"

// Replay isolation (replica's replay budget): consumer fetches that read
// far behind the log end draw on a per-broker byte budget, so a backfill
// cannot take the disks and cores the tail's readers and writers need.
// Fjord's own names; Kafka has no such settings.
const (
	// ReplayRateConfig is replay.max.bytes.per.second: the bytes per
	// second this broker's consumer fetches may read far behind the log
	// end, all partitions together. Unset: no budget.
	ReplayRateConfig = "replay.max.bytes.per.second"
	// ReplayTailConfig is replay.tail.bytes: how far behind the log end
	// (in bytes of the partition's log) a fetch must read to draw on
	// the budget. Unset: DefaultReplayTailBytes.
	ReplayTailConfig = "replay.tail.bytes"
)

// DefaultReplayTailBytes is replay.tail.bytes when unset: 64 MiB of a
// partition's tail, well inside the page cache of any machine that
// holds the partition, is read as the tail.
const DefaultReplayTailBytes = 64 << 20

// The Kafka listener's connection limits (Kafka's names; the listener
// enforces them at accept, kafkaserver/connlimit.go). Unset: no limit.
const (
	// MaxConnectionsConfig is max.connections: the client connections
	// the broker's Kafka listener holds at once.
	MaxConnectionsConfig = "max.connections"
	// MaxConnectionsPerIPConfig is max.connections.per.ip: the
	// connections one remote address may hold at once.
	MaxConnectionsPerIPConfig = "max.connections.per.ip"
	// MaxConnectionsPerIPOverridesConfig is
	// max.connections.per.ip.overrides: per-address exceptions to
	// max.connections.per.ip, "host:count,host:count".
	MaxConnectionsPerIPOverridesConfig = "max.connections.per.ip.overrides"
)

// MaxConnectionOverridesBytes bounds max.connections.per.ip.overrides.
// The value is parsed on every node at each metadata image that changes
// it and travels in one metadata record; 64 KiB is thousands of entries,
// more than any operator lists by hand, and keeps a hostile value from
// costing every node megabytes.
const MaxConnectionOverridesBytes = 64 << 10

// BrokerConfigDef describes one dynamic broker config.
type BrokerConfigDef struct {
	Type string // Kafka's config type name: "long", "int", "string"
	Doc  string
	// check returns nil for an allowed value, else an error saying what
	// is allowed; ValidateBrokerConfig puts the name and value before it.
	check func(value string) error
}

// DynamicBrokerConfigs are the broker configs that may be set at run
// time. Kafka's leader.replication.throttled.rate is not among them:
// Fjord throttles a reassignment's copies on the follower that makes
// them, which is the side that knows which replicas are being added.
// Kafka's max.connection.creation.rate is not either: Kafka enforces it
// by delaying accept, which makes every new connection wait behind a
// flood; a per-address creation rate belongs with client quotas
// (KIP-612's connection_creation_rate for an ip entity).
var DynamicBrokerConfigs = map[string]BrokerConfigDef{
	FollowerThrottleRateConfig: {
		Type: "long",
		Doc: "Bytes per second this broker may copy for the replicas a partition reassignment adds to it " +
			"(at least 1; delete the config to remove the throttle). Other replication is never throttled.",
		check: func(v string) error {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 1 {
				return errors.New("want a whole number of bytes per second, at least 1 (delete the config to remove the throttle)")
			}
			return nil
		},
	},
	MaxConnectionsConfig: {
		Type: "int",
		Doc: "Client connections this broker's Kafka listener holds at once (at least 1; delete the config for no limit). " +
			"A connection past it is closed as soon as it is accepted; open ones keep working. " +
			"Connections from the IP address of a registered broker's listener are neither counted nor refused.",
		check: func(v string) error { return checkConnectionCount(v, 1) },
	},
	MaxConnectionsPerIPConfig: {
		Type: "int",
		Doc: "Connections one remote IP address may hold at once on this broker's Kafka listener " +
			"(0 or more; 0 refuses every address without an override; delete the config for no limit). " +
			"A connection past it is closed as soon as it is accepted; open ones keep working. " +
			"Registered brokers' listener addresses are exempt.",
		check: func(v string) error { return checkConnectionCount(v, 0) },
	},
	MaxConnectionsPerIPOverridesConfig: {
		Type: "string",
		Doc: "Per-address exceptions to max.connections.per.ip, Kafka's format: comma-separated host:count, " +
			"count 0 or more, e.g. 10.0.0.7:200,[2001:db8::1]:50. A host is matched against the connection's " +
			"remote IP address, so only an IP literal matches: a host name is accepted (as Kafka does) but never resolved, " +
			"and matches nothing. At most 65536 bytes.",
		check: func(v string) error { _, err := parseConnectionOverrides(v); return err },
	},
	ReplayRateConfig: {
		Type: "long",
		Doc: "Bytes per second this broker's consumer fetches may read from partitions far behind their log end " +
			"(more than replay.tail.bytes), all partitions and consumers together, so a backfill cannot slow the consumers and producers at the tail " +
			"(at least 1; delete the config for no budget). Fetches at the tail and followers' fetches never draw on it.",
		check: func(v string) error {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 1 {
				return errors.New("want a whole number of bytes per second, at least 1 (delete the config for no budget)")
			}
			return nil
		},
	},
	ReplayTailConfig: {
		Type: "long",
		Doc: "How far behind its partition's log end (in bytes of the log) a consumer fetch must read to draw on " +
			"replay.max.bytes.per.second (0 or more; delete the config for 67108864, 64 MiB).",
		check: func(v string) error {
			if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
				return errors.New("want a whole number of bytes, 0 or more (delete the config for the default, 64 MiB)")
			}
			return nil
		},
	},
	FreeSpaceWarnConfig: {
		Type: "string",
		Doc: "Free space in this broker's data directory below which it warns (a log line, fjord_log_dir_free_space_state 1): " +
			"bytes with an optional unit (e.g. 20GiB) or a percentage of the file system (e.g. 10%). " +
			"Delete the config for the node's --log-dir-free-space-warn.",
		check: func(v string) error { _, err := ParseFreeSpace(v); return err },
	},
	FreeSpaceRefuseConfig: {
		Type: "string",
		Doc: "Free space in this broker's data directory below which it refuses client produces with KAFKA_STORAGE_ERROR " +
			"(retriable) before appending anything, while fetches, replication, retention, compaction and deletions go on; " +
			"produces resume by themselves once free space is back above it. Bytes with an optional unit (e.g. 1GiB) " +
			"or a percentage of the file system (e.g. 2%). Delete the config for the node's --log-dir-free-space-refuse.",
		check: func(v string) error { _, err := ParseFreeSpace(v); return err },
	},
}

// DynamicBrokerConfigNames lists the dynamic broker configs, for
// messages that refuse another name.
func DynamicBrokerConfigNames() string {
	return strings.Join(slices.Sorted(maps.Keys(DynamicBrokerConfigs)), ", ")
}

// ValidateBrokerConfig checks a dynamic broker config's name and value.
func ValidateBrokerConfig(name, value string) error {
	def, ok := DynamicBrokerConfigs[name]
	if !ok {
		return fmt.Errorf("%w: %q is not a dynamic broker config (the dynamic ones are %s; set the others with flags, FJORD_* variables or the --config file)",
			ErrInvalidConfig, shortForMessage(name), DynamicBrokerConfigNames())
	}
	if err := def.check(value); err != nil {
		return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, name, shortForMessage(value), err)
	}
	return nil
}

// checkConnectionCount checks a connection limit: a whole number from
// least to Kafka's int maximum.
func checkConnectionCount(v string, least int64) error {
	if n, err := strconv.ParseInt(v, 10, 32); err != nil || n < least {
		return fmt.Errorf("want a whole number of connections from %d to %d (delete the config for no limit)", least, math.MaxInt32)
	}
	return nil
}

// parseConnectionOverrides reads max.connections.per.ip.overrides:
// comma-separated host:count entries (whitespace around an entry, its
// host and its count is allowed), split at an entry's last colon as
// Kafka does, so an IPv6 literal needs no brackets (they are allowed).
// It returns the counts of the IP literals, IPv4-mapped IPv6 unmapped
// and zones dropped, as connections are matched; host names are checked
// and dropped. "" is no overrides. Refused: a value over
// MaxConnectionOverridesBytes, an empty entry, an entry without a colon,
// an empty host, a host that is neither an IP literal nor a host name, a
// count that is not a whole number from 0 to 2^31-1, and a host given
// twice (names compared without case, addresses after unmapping).
func parseConnectionOverrides(v string) (map[netip.Addr]int, error) {
	if len(v) > MaxConnectionOverridesBytes {
		return nil, fmt.Errorf("the value is %d bytes; at most %d", len(v), MaxConnectionOverridesBytes)
	}
	out := map[netip.Addr]int{}
	if v == "" {
		return out, nil
	}
	names := map[string]bool{}
	for i, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		bad := func(format string, args ...any) error {
			return fmt.Errorf("entry %d %q: %s (want host:count, comma-separated)", i+1, shortForMessage(entry), fmt.Sprintf(format, args...))
		}
		if entry == "" {
			return nil, bad("empty")
		}
		colon := strings.LastIndexByte(entry, ':')
		if colon < 0 {
			return nil, bad("no count")
		}
		host, count := strings.TrimSpace(entry[:colon]), strings.TrimSpace(entry[colon+1:])
		if n, err := strconv.ParseInt(count, 10, 32); err != nil || n < 0 {
			return nil, bad("the count is not a whole number from 0 to %d", math.MaxInt32)
		}
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			host = host[1 : len(host)-1]
		}
		if host == "" {
			return nil, bad("no host")
		}
		n, _ := strconv.Atoi(count) // checked above
		if addr, err := netip.ParseAddr(host); err == nil {
			addr = addr.Unmap().WithZone("")
			if _, dup := out[addr]; dup {
				return nil, bad("%s is given more than once", addr)
			}
			out[addr] = n
			continue
		}
		if !isHostName(host) {
			return nil, bad("%q is neither an IP address nor a host name", shortForMessage(host))
		}
		key := strings.ToLower(strings.TrimSuffix(host, "."))
		if names[key] {
			return nil, bad("%s is given more than once", host)
		}
		names[key] = true
	}
	return out, nil
}

// isHostName reports whether s is a syntactically valid DNS host name
// (RFC 1123 labels). A name whose last label is all digits is not one
// (RFC 3696): "1.2.3" and "1.2.3.400" are mistyped addresses.
func isHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	last := labels[len(labels)-1]
	return strings.ContainsFunc(last, func(r rune) bool { return r < '0' || r > '9' })
}

// shortForMessage keeps a hostile value from filling an error message
// (and the logs and responses that carry it).
func shortForMessage(s string) string {
	const limit = 64
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

// BrokerConfig returns broker's value of a dynamic config: its own, else
// the cluster default. fromDefault says which; ok is false when neither
// is set.
func (img *Image) BrokerConfig(broker int32, name string) (value string, fromDefault, ok bool) {
	if v, ok := img.BrokerConfigs[broker][name]; ok {
		return v, false, true
	}
	v, ok := img.BrokerConfigs[-1][name]
	return v, true, ok
}

// FollowerThrottleRate is broker's follower.replication.throttled.rate
// in bytes per second, 0 when it has none.
func (img *Image) FollowerThrottleRate(broker int32) int64 {
	v, _, ok := img.BrokerConfig(broker, FollowerThrottleRateConfig)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(v, 10, 64) // checked when applied
	return n
}

// ReplayBudget is broker's replay.max.bytes.per.second (0 when unset:
// no budget) and replay.tail.bytes (DefaultReplayTailBytes when unset).
func (img *Image) ReplayBudget(broker int32) (rate, tail int64) {
	tail = DefaultReplayTailBytes
	if v, _, ok := img.BrokerConfig(broker, ReplayRateConfig); ok {
		rate, _ = strconv.ParseInt(v, 10, 64) // checked when applied
	}
	if v, _, ok := img.BrokerConfig(broker, ReplayTailConfig); ok {
		tail, _ = strconv.ParseInt(v, 10, 64)
	}
	return rate, tail
}

// NoConnectionLimit is a ConnectionLimits count that is not set.
const NoConnectionLimit = -1

// ConnectionLimits are a broker's connection configs, parsed: each its
// own value, else the cluster default. A limit of NoConnectionLimit is
// unset.
type ConnectionLimits struct {
	MaxConnections      int
	MaxConnectionsPerIP int
	// PerIPOverrides are max.connections.per.ip.overrides' IP literals
	// (unmapped, without zones); its host names match nothing and are
	// not here. Never nil.
	PerIPOverrides map[netip.Addr]int
}

// PerIPLimit is the connections addr may hold: its override, else
// max.connections.per.ip (NoConnectionLimit when neither is set).
func (l ConnectionLimits) PerIPLimit(addr netip.Addr) int {
	if n, ok := l.PerIPOverrides[addr]; ok {
		return n
	}
	return l.MaxConnectionsPerIP
}

// ConnectionLimits reads broker's connection configs. Values were
// checked when applied; the overrides are parsed anew, so call it when
// the image changes, not per connection.
func (img *Image) ConnectionLimits(broker int32) ConnectionLimits {
	count := func(name string) int {
		v, _, ok := img.BrokerConfig(broker, name)
		if !ok {
			return NoConnectionLimit
		}
		n, _ := strconv.Atoi(v) // checked when applied
		return n
	}
	l := ConnectionLimits{MaxConnections: count(MaxConnectionsConfig), MaxConnectionsPerIP: count(MaxConnectionsPerIPConfig)}
	v, _, _ := img.BrokerConfig(broker, MaxConnectionsPerIPOverridesConfig)
	l.PerIPOverrides, _ = parseConnectionOverrides(v) // checked when applied
	if l.PerIPOverrides == nil {
		l.PerIPOverrides = map[netip.Addr]int{}
	}
	return l
}

// ReplicasOn counts the partitions that name broker among their
// replicas (a reassignment's added and removed ones too), and names the
// first of them in topic order ("" when there is none). It walks every
// partition: for the rare decommission, not for a hot path.
func (img *Image) ReplicasOn(broker int32) (n int, first string) {
	for _, name := range img.TopicNames() {
		for p, part := range img.Topics[name].Partitions {
			if slices.Contains(part.Replicas, broker) {
				if n == 0 {
					first = fmt.Sprintf("%s-%d", name, p)
				}
				n++
			}
		}
	}
	return n, first
}
