package bench

import (
	"embed"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A Workload is one benchmark's shape, in the OpenMessaging Benchmark's
// YAML field names so a workload reads the same as OMB's:
//
//	name: max-rate-16p-1kb-4p4c
//	topics: 1
//	partitionsPerTopic: 16
//	messageSize: 1024
//	producersPerTopic: 4
//	consumerPerSubscription: 4
//	producerRate: 0            # records/s over all producers; 0: as fast as possible
//	testDurationSeconds: 30
//	warmupSeconds: 10
//
// Where OMB counts minutes (testDurationMinutes) this counts seconds, so
// a run fits a test; messageCount and consumerBacklogSizeGB are the other
// two ways to say how long a run lasts (see Validate).
type Workload struct {
	Name string `yaml:"name" json:"name"`
	// Topics is how many topics the run creates, each with
	// PartitionsPerTopic partitions and its own producers and consumers.
	Topics             int `yaml:"topics" json:"topics"`
	PartitionsPerTopic int `yaml:"partitionsPerTopic" json:"partitionsPerTopic"`
	// MessageSize is each record value's size in bytes. The first 16
	// bytes carry the intended send time and a sequence number
	// (payload.go), so it is at least 16.
	MessageSize int `yaml:"messageSize" json:"messageSize"`
	// PayloadRandomness is the share (0..1) of each value after the
	// header that is random bytes; the rest is zeros. The default 1
	// keeps a compressing client or broker from flattering the numbers.
	PayloadRandomness float64 `yaml:"payloadRandomness" json:"payloadRandomness"`
	// SubscriptionsPerTopic is how many independent readers of every
	// record a topic has (default 1). Without consumer groups each
	// subscription is its own set of consumers that split the
	// partitions between them.
	SubscriptionsPerTopic   int `yaml:"subscriptionsPerTopic" json:"subscriptionsPerTopic"`
	ConsumerPerSubscription int `yaml:"consumerPerSubscription" json:"consumerPerSubscription"`
	ProducersPerTopic       int `yaml:"producersPerTopic" json:"producersPerTopic"`
	// ProducerRate is records/s over all producers of all topics, each
	// producer sending its equal share; 0 sends as fast as possible.
	ProducerRate float64 `yaml:"producerRate" json:"producerRate"`
	// TestDurationSeconds is the measured window after the warmup.
	TestDurationSeconds float64 `yaml:"testDurationSeconds" json:"testDurationSeconds,omitempty"`
	// MessageCount is the records the measured window sends, over all
	// producers, instead of a duration.
	MessageCount int64 `yaml:"messageCount" json:"messageCount,omitempty"`
	// WarmupSeconds runs the workload unmeasured first, so connection
	// setup, metadata and the first segment files do not count.
	WarmupSeconds  float64        `yaml:"warmupSeconds" json:"warmupSeconds"`
	KeyDistributor KeyDistributor `yaml:"keyDistributor" json:"keyDistributor"`
	// ConsumerBacklogSizeGB makes a catch-up run: producers first write
	// this many GiB (2^30 bytes, as OMB counts) with no consumer
	// running; then consumers start from the beginning and the measured
	// figure is how fast they read it all.
	ConsumerBacklogSizeGB float64 `yaml:"consumerBacklogSizeGB" json:"consumerBacklogSizeGB,omitempty"`
	// ReplicationFactor is each topic's replicas (OMB keeps it in its
	// Kafka driver's file; here it belongs to the workload so one file
	// says what ran). 0 leaves it to the run: `fjord bench run --local`
	// gives 3 with 3 or more nodes (fewer nodes, one replica each), a
	// run against --brokers the cluster's default, and the NATS peer
	// R1 unless told otherwise.
	ReplicationFactor int `yaml:"replicationFactor" json:"replicationFactor,omitempty"`
}

// KeyDistributor says which key each record carries, as OMB's does.
type KeyDistributor string

const (
	// NoKey sends records without keys: the client's partitioner spreads
	// them.
	NoKey KeyDistributor = "NO_KEY"
	// KeyRoundRobin cycles through a fixed set of keys.
	KeyRoundRobin KeyDistributor = "KEY_ROUND_ROBIN"
	// RandomNano picks a key from the same set at random (OMB seeds the
	// choice with System.nanoTime, hence the name).
	RandomNano KeyDistributor = "RANDOM_NANO"
)

var keyDistributors = []KeyDistributor{NoKey, KeyRoundRobin, RandomNano}

// Limits on workload values. They bound what a run can ask of memory
// (sequence bitsets, payload pools) and keep file names sane; a real
// need beyond them is a reason to raise them, not a user error.
const (
	minMessageSize = payloadHeaderSize
	// maxMessageSize keeps one record inside a 1 MiB batch with room for
	// the batch and record headers.
	maxMessageSize   = 1_000_000
	maxTopics        = 1000
	maxPartitions    = 10_000
	maxSubscriptions = 100
	// maxProducers bounds producers over all topics: each holds a
	// payload pool of about 1.5 MiB (payload.go). It is also below the
	// 2^16 producer indexes a sequence has room for.
	maxProducers       = 256
	maxProducerRate    = 100_000_000
	maxDurationSeconds = 24 * 3600
	maxWarmupSeconds   = 3600
	maxMessageCount    = 1 << 40
	maxBacklogGB       = 1024
	// maxReplicationFactor is what CreateTopics' int16 field holds.
	maxReplicationFactor = math.MaxInt16
	bytesPerGB           = 1 << 30
)

var workloadNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)

//go:embed workloads/*.yaml
var shippedWorkloads embed.FS

// WorkloadNames lists the workloads shipped with Fjord, sorted.
func WorkloadNames() []string {
	entries, err := fs.ReadDir(shippedWorkloads, "workloads")
	if err != nil {
		panic(fmt.Sprintf("embedded workloads unreadable: %v", err))
	}
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	slices.Sort(names)
	return names
}

// LoadWorkload reads a workload. nameOrPath is a file when it contains a
// slash or ends in .yaml or .yml; otherwise it is the name of a shipped
// workload (WorkloadNames), which works from any directory because the
// files are compiled into the binary.
func LoadWorkload(nameOrPath string) (*Workload, error) {
	if strings.ContainsRune(nameOrPath, '/') || strings.HasSuffix(nameOrPath, ".yaml") || strings.HasSuffix(nameOrPath, ".yml") {
		data, err := os.ReadFile(nameOrPath)
		if err != nil {
			return nil, fmt.Errorf("workload file: %w", err)
		}
		return ParseWorkload(data, nameOrPath)
	}
	data, err := shippedWorkloads.ReadFile(path.Join("workloads", nameOrPath+".yaml"))
	if err != nil {
		return nil, fmt.Errorf("%w %q: want one of %s, or a path to a .yaml file",
			ErrUnknownWorkload, nameOrPath, strings.Join(WorkloadNames(), ", "))
	}
	return ParseWorkload(data, nameOrPath)
}

// workloadField is one YAML field: where it decodes to and, for the
// error message, what kind of value it wants.
type workloadField struct {
	name string
	ptr  any
	want string
}

func (w *Workload) fields() []workloadField {
	return []workloadField{
		{"name", &w.Name, "a name"},
		{"topics", &w.Topics, "an integer"},
		{"partitionsPerTopic", &w.PartitionsPerTopic, "an integer"},
		{"messageSize", &w.MessageSize, "an integer (bytes)"},
		{"payloadRandomness", &w.PayloadRandomness, "a number from 0 to 1"},
		{"subscriptionsPerTopic", &w.SubscriptionsPerTopic, "an integer"},
		{"consumerPerSubscription", &w.ConsumerPerSubscription, "an integer"},
		{"producersPerTopic", &w.ProducersPerTopic, "an integer"},
		{"producerRate", &w.ProducerRate, "a number (records/s)"},
		{"testDurationSeconds", &w.TestDurationSeconds, "a number (seconds)"},
		{"messageCount", &w.MessageCount, "an integer"},
		{"warmupSeconds", &w.WarmupSeconds, "a number (seconds)"},
		{"keyDistributor", &w.KeyDistributor, "one of NO_KEY, KEY_ROUND_ROBIN, RANDOM_NANO"},
		{"consumerBacklogSizeGB", &w.ConsumerBacklogSizeGB, "a number (GiB)"},
		{"replicationFactor", &w.ReplicationFactor, "an integer (replicas per partition)"},
	}
}

// ParseWorkload decodes a workload strictly: an unknown or repeated
// field, a value of the wrong type or out of range is an error naming
// the source, the field and what is allowed. source names the input in
// messages.
func ParseWorkload(data []byte, source string) (*Workload, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidWorkload, source, fmt.Sprintf(format, args...))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, bad("not valid YAML: %v", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, bad("empty file")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, bad("want a map of fields (e.g. \"topics: 1\"), line %d", root.Line)
	}
	w := &Workload{PayloadRandomness: 1, SubscriptionsPerTopic: 1, KeyDistributor: NoKey}
	fields := w.fields()
	var names []string
	for _, f := range fields {
		names = append(names, f.name)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		idx := slices.IndexFunc(fields, func(f workloadField) bool { return f.name == k.Value })
		if k.Kind != yaml.ScalarNode || idx < 0 {
			return nil, bad("unknown field %q on line %d (allowed: %s)", k.Value, k.Line, strings.Join(names, ", "))
		}
		if seen[k.Value] {
			return nil, bad("field %s given twice (line %d)", k.Value, k.Line)
		}
		seen[k.Value] = true
		f := fields[idx]
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, bad("%s on line %d: want %s, not a list, a map or nothing", f.name, k.Line, f.want)
		}
		// yaml.v3 would truncate 1.5 into an int field; only an
		// integer's tag is taken for one.
		_, isInt := f.ptr.(*int)
		_, isInt64 := f.ptr.(*int64)
		if err := v.Decode(f.ptr); err != nil || (isInt || isInt64) && v.ShortTag() != "!!int" {
			return nil, bad("%s %q on line %d: want %s", f.name, v.Value, k.Line, f.want)
		}
	}
	if err := w.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return w, nil
}

// Validate checks every field's range and how they combine. A run lasts
// either testDurationSeconds or messageCount after the warmup (exactly
// one of them), or, with consumerBacklogSizeGB, until the backlog is
// written and read (then none of the three).
func (w *Workload) Validate() error {
	bad := func(field string, v any, allowed string) error {
		return fmt.Errorf("%w: %s %v: allowed: %s", ErrInvalidWorkload, field, v, allowed)
	}
	finite := func(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
	switch {
	case !workloadNameRE.MatchString(w.Name):
		return bad("name", fmt.Sprintf("%q", w.Name), "1 to 100 letters, digits, '.', '_' or '-' (it names the result files)")
	case w.Topics < 1 || w.Topics > maxTopics:
		return bad("topics", w.Topics, fmt.Sprintf("1 to %d", maxTopics))
	case w.PartitionsPerTopic < 1 || w.PartitionsPerTopic > maxPartitions:
		return bad("partitionsPerTopic", w.PartitionsPerTopic, fmt.Sprintf("1 to %d", maxPartitions))
	case w.MessageSize < minMessageSize || w.MessageSize > maxMessageSize:
		return bad("messageSize", w.MessageSize, fmt.Sprintf("%d to %d bytes (the first %d carry the send time and sequence)", minMessageSize, maxMessageSize, payloadHeaderSize))
	case !(w.PayloadRandomness >= 0 && w.PayloadRandomness <= 1):
		return bad("payloadRandomness", w.PayloadRandomness, "0 to 1 (the share of each value that is random bytes)")
	case w.SubscriptionsPerTopic < 1 || w.SubscriptionsPerTopic > maxSubscriptions:
		return bad("subscriptionsPerTopic", w.SubscriptionsPerTopic, fmt.Sprintf("1 to %d", maxSubscriptions))
	case w.ConsumerPerSubscription < 1 || w.ConsumerPerSubscription > w.PartitionsPerTopic:
		return bad("consumerPerSubscription", w.ConsumerPerSubscription, fmt.Sprintf("1 to partitionsPerTopic (%d): each consumer reads its own partitions", w.PartitionsPerTopic))
	case w.ProducersPerTopic < 1 || w.ProducersPerTopic*w.Topics > maxProducers:
		return bad("producersPerTopic", w.ProducersPerTopic, fmt.Sprintf("1 to %d over all topics (%d topics)", maxProducers, w.Topics))
	case !finite(w.ProducerRate) || w.ProducerRate < 0 || w.ProducerRate > maxProducerRate:
		return bad("producerRate", w.ProducerRate, fmt.Sprintf("0 (as fast as possible) to %d records/s", maxProducerRate))
	case !finite(w.TestDurationSeconds) || w.TestDurationSeconds < 0 || w.TestDurationSeconds > maxDurationSeconds:
		return bad("testDurationSeconds", w.TestDurationSeconds, fmt.Sprintf("0 to %d", maxDurationSeconds))
	case w.MessageCount < 0 || w.MessageCount > maxMessageCount:
		return bad("messageCount", w.MessageCount, fmt.Sprintf("0 to %d", int64(maxMessageCount)))
	case !finite(w.WarmupSeconds) || w.WarmupSeconds < 0 || w.WarmupSeconds > maxWarmupSeconds:
		return bad("warmupSeconds", w.WarmupSeconds, fmt.Sprintf("0 to %d", maxWarmupSeconds))
	case !slices.Contains(keyDistributors, w.KeyDistributor):
		return bad("keyDistributor", fmt.Sprintf("%q", w.KeyDistributor), "NO_KEY, KEY_ROUND_ROBIN, RANDOM_NANO")
	case !finite(w.ConsumerBacklogSizeGB) || w.ConsumerBacklogSizeGB < 0 || w.ConsumerBacklogSizeGB > maxBacklogGB:
		return bad("consumerBacklogSizeGB", w.ConsumerBacklogSizeGB, fmt.Sprintf("0 to %d GiB", maxBacklogGB))
	case w.ReplicationFactor < 0 || w.ReplicationFactor > maxReplicationFactor:
		return bad("replicationFactor", w.ReplicationFactor, fmt.Sprintf("0 (the run's default) to %d", maxReplicationFactor))
	}
	if w.ConsumerBacklogSizeGB > 0 {
		switch {
		case w.TestDurationSeconds != 0:
			return bad("testDurationSeconds", w.TestDurationSeconds, "nothing with consumerBacklogSizeGB: a catch-up run lasts until its backlog is consumed")
		case w.MessageCount != 0:
			return bad("messageCount", w.MessageCount, "nothing with consumerBacklogSizeGB: the backlog's size sets the record count")
		case w.WarmupSeconds != 0:
			return bad("warmupSeconds", w.WarmupSeconds, "nothing with consumerBacklogSizeGB: the whole backlog is measured")
		case w.backlogBytes() < int64(w.MessageSize)*int64(w.Topics*w.ProducersPerTopic):
			return bad("consumerBacklogSizeGB", w.ConsumerBacklogSizeGB, "at least one record per producer")
		}
		return nil
	}
	if (w.TestDurationSeconds > 0) == (w.MessageCount > 0) {
		return fmt.Errorf("%w: give exactly one of testDurationSeconds (got %v) and messageCount (got %d), or consumerBacklogSizeGB for a catch-up run",
			ErrInvalidWorkload, w.TestDurationSeconds, w.MessageCount)
	}
	if w.MessageCount > 0 && w.MessageCount < int64(w.Topics*w.ProducersPerTopic) {
		return bad("messageCount", w.MessageCount, fmt.Sprintf("at least one record per producer (%d)", w.Topics*w.ProducersPerTopic))
	}
	return nil
}

// backlogBytes is consumerBacklogSizeGB in bytes.
func (w *Workload) backlogBytes() int64 {
	return int64(w.ConsumerBacklogSizeGB * bytesPerGB)
}

// catchUp reports whether w is a catch-up (backlog) run.
func (w *Workload) catchUp() bool { return w.ConsumerBacklogSizeGB > 0 }

// producers is the number of producers over all topics.
func (w *Workload) producers() int { return w.Topics * w.ProducersPerTopic }
