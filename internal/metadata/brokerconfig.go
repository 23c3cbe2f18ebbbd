package metadata

import (
	"fmt"
	"slices"
	"strconv"
)

// Dynamic broker configs: the few broker settings an operator changes
// while the cluster runs, kept in the metadata log (BrokerConfigRecord)
// so every node sees the same. Everything else about a broker is static.

// FollowerThrottleRateConfig is follower.replication.throttled.rate
// (Kafka's name): the bytes per second a broker's followers may copy
// for the replicas a reassignment is adding to it. Unset: no throttle.
const FollowerThrottleRateConfig = "follower.replication.throttled.rate"

// BrokerConfigDef describes one dynamic broker config.
type BrokerConfigDef struct {
	Type string // Kafka's config type name: "long"
	Doc  string
}

// DynamicBrokerConfigs are the broker configs that may be set at run
// time. Kafka's leader.replication.throttled.rate is not among them:
// Fjord throttles a reassignment's copies on the follower that makes
// them, which is the side that knows which replicas are being added.
var DynamicBrokerConfigs = map[string]BrokerConfigDef{
	FollowerThrottleRateConfig: {
		Type: "long",
		Doc: "Bytes per second this broker may copy for the replicas a partition reassignment adds to it " +
			"(at least 1; delete the config to remove the throttle). Other replication is never throttled.",
	},
}

// ValidateBrokerConfig checks a dynamic broker config's name and value.
func ValidateBrokerConfig(name, value string) error {
	if _, ok := DynamicBrokerConfigs[name]; !ok {
		return fmt.Errorf("%w: %q is not a dynamic broker config (the only one is %s; set the others with flags, FJORD_* variables or the --config file)",
			ErrInvalidConfig, name, FollowerThrottleRateConfig)
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil || n < 1 {
		return fmt.Errorf("%w: %s=%q: want a whole number of bytes per second, at least 1 (delete the config to remove the throttle)",
			ErrInvalidConfig, name, value)
	}
	return nil
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
