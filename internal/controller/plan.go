package controller

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// Pure decisions: given an image and a request, what records to propose
// (or why not). No Raft, no clock, no randomness except through the read
// function handed to newUUID, so each rule is a table test.

// MaxPartitionsPerTopic bounds a topic's partition count (CreateTopics and
// CreatePartitions). Kafka has no such limit, but every partition is a
// directory of files and a record in every image; a request for a million
// partitions is a typo, and refusing it is cheaper than living with it.
const MaxPartitionsPerTopic = 10000

// ProducerIDBlockSize is how many producer ids one AllocateProducerIDs call
// hands out (Kafka's block size).
const ProducerIDBlockSize = 1000

// checkAssignments validates explicit replica assignments: each partition
// non-empty, only registered brokers, no broker twice, and (rf > 0) every
// partition with rf replicas, else all with the first's count. Returns the
// replication factor.
func checkAssignments(img *metadata.Image, assignments [][]int32, rf int) (int, error) {
	for p, reps := range assignments {
		if len(reps) == 0 {
			return 0, fmt.Errorf("%w: partition %d has no replicas", controlplane.ErrInvalidReplicaAssignment, p)
		}
		if rf <= 0 {
			rf = len(reps)
		}
		if len(reps) != rf {
			return 0, fmt.Errorf("%w: partition %d has %d replicas, others %d: all partitions need the same replication factor",
				controlplane.ErrInvalidReplicaAssignment, p, len(reps), rf)
		}
		live := false
		for i, b := range reps {
			br, ok := img.Brokers[b]
			if !ok {
				return 0, fmt.Errorf("%w: partition %d: broker %d is not registered (brokers: %v)", controlplane.ErrInvalidReplicaAssignment, p, b, img.BrokerIDs())
			}
			live = live || br.Active()
			if slices.Contains(reps[:i], b) {
				return 0, fmt.Errorf("%w: partition %d lists broker %d twice", controlplane.ErrInvalidReplicaAssignment, p, b)
			}
		}
		if !live {
			// As in KRaft: the partition would start with no leader.
			return 0, fmt.Errorf("%w: partition %d: none of brokers %v is live (all fenced or shutting down)", controlplane.ErrInvalidReplicationFactor, p, reps)
		}
	}
	return rf, nil
}

// checkReplicationFactor refuses rf replicas per new partition that
// placeReplicas cannot place on brokers: none active to lead, or more
// replicas than brokers registered.
func checkReplicationFactor(brokers []metadata.Broker, rf int) error {
	live := activeCount(brokers)
	switch {
	case live == 0:
		return fmt.Errorf("%w: no live brokers (registered, unfenced and not shutting down)", controlplane.ErrInvalidReplicationFactor)
	case rf < 1:
		return fmt.Errorf("%w: replication factor %d (allowed: 1 to %d, or -1 for the default)", controlplane.ErrInvalidReplicationFactor, rf, len(brokers))
	case rf > len(brokers):
		return fmt.Errorf("%w: replication factor %d is larger than the number of registered brokers (%d, %d of them live)",
			controlplane.ErrInvalidReplicationFactor, rf, len(brokers), live)
	}
	return nil
}

// DefaultReplicationFactor is default.replication.factor when
// Config.ReplicationFactor is not set: Kafka's default is 1, Fjord's 3,
// so an acknowledged write survives the loss of a broker ("durable by
// default"), as a topic of three replicas with min.insync.replicas 2
// does.
const DefaultReplicationFactor = 3

// topicDefaults are the broker settings a controlplane.CreateTopic's -1s
// resolve to.
type topicDefaults struct {
	numPartitions int32 // num.partitions
	// replicationFactor is default.replication.factor (<= 0:
	// DefaultReplicationFactor), capped at the registered brokers.
	replicationFactor int16
}

// defaultReplicationFactor is the replication factor a topic created
// with -1 gets among brokers registered brokers: the configured default,
// capped at the brokers there are. Kafka refuses such a create instead
// (INVALID_REPLICATION_FACTOR), which makes a default of 3 unusable on
// a single node or a cluster still starting; capping keeps them
// working, and CreateTopics logs the topic as under-replicated by
// design. An explicit replication factor is never capped.
func (d topicDefaults) defaultReplicationFactor(brokers int) int {
	rf := int(d.replicationFactor)
	if rf <= 0 {
		rf = DefaultReplicationFactor
	}
	return min(rf, brokers)
}

// planTopic checks everything about one controlplane.CreateTopic except
// its name and whether it exists, and returns its partitions and config
// overrides. The topic's id is not part of the plan (it is drawn only when
// creating).
func planTopic(img *metadata.Image, req controlplane.CreateTopic, def topicDefaults) ([]metadata.Partition, map[string]string, error) {
	brokers := registeredBrokers(img)
	var replicas [][]int32
	if len(req.Assignments) > 0 {
		if req.NumPartitions != -1 || req.ReplicationFactor != -1 {
			return nil, nil, fmt.Errorf("%w: replica assignments given together with a partition count (%d) or replication factor (%d); both must be -1",
				controlplane.ErrInvalidRequest, req.NumPartitions, req.ReplicationFactor)
		}
		if len(req.Assignments) > MaxPartitionsPerTopic {
			return nil, nil, fmt.Errorf("%w: %d partitions (at most %d)", controlplane.ErrInvalidPartitions, len(req.Assignments), MaxPartitionsPerTopic)
		}
		if _, err := checkAssignments(img, req.Assignments, 0); err != nil {
			return nil, nil, err
		}
		replicas = req.Assignments
	} else {
		n := req.NumPartitions
		if n == -1 {
			n = max(def.numPartitions, 1)
		}
		if n < 1 || n > MaxPartitionsPerTopic {
			return nil, nil, fmt.Errorf("%w: %d partitions (allowed: 1 to %d, or -1 for the default %d)",
				controlplane.ErrInvalidPartitions, n, MaxPartitionsPerTopic, max(def.numPartitions, 1))
		}
		rf := int(req.ReplicationFactor)
		if rf == -1 {
			rf = def.defaultReplicationFactor(len(brokers))
		}
		if err := checkReplicationFactor(brokers, rf); err != nil {
			return nil, nil, err
		}
		replicas = placeReplicas(brokers, req.Name, nil, int(n), rf)
	}

	configs := make(map[string]string, len(req.Configs))
	names := make([]string, 0, len(req.Configs))
	for name := range req.Configs {
		names = append(names, name)
	}
	slices.Sort(names) // the first bad config named is the same every time
	for _, name := range names {
		if err := img.ValidateTopicConfig(name, req.Configs[name]); err != nil {
			return nil, nil, err
		}
		configs[name] = req.Configs[name]
	}
	// min.insync.replicas is not written here when the request leaves
	// it out: its default follows the replication factor where it is
	// read (replica's defaultMinInsyncReplicas), so DescribeConfigs
	// reports it as a default. A value above the replication factor is
	// accepted, as Kafka accepts it: acks=all is then refused with
	// NOT_ENOUGH_REPLICAS until the topic has that many in sync.
	return newPartitions(img, replicas), configs, nil
}

// newPartitions: the ISR is the replicas that are active in img (a
// manual assignment may name a fenced broker, as in KRaft: it joins
// once it is back and caught up), the leader the first of them, epoch 0.
// checkAssignments has made sure each partition has one.
func newPartitions(img *metadata.Image, replicas [][]int32) []metadata.Partition {
	parts := make([]metadata.Partition, len(replicas))
	for i, reps := range replicas {
		isr := slices.DeleteFunc(slices.Clone(reps), func(b int32) bool { return !img.Brokers[b].Active() })
		parts[i] = metadata.Partition{
			Replicas: slices.Clone(reps),
			ISR:      isr,
			Leader:   isr[0],
		}
	}
	return parts
}

// topicRecords is the batch that creates t (or, with first > 0, adds its
// partitions from first on).
func topicRecords(t *metadata.Topic, first int) []metadata.Record {
	var recs []metadata.Record
	if first == 0 {
		recs = append(recs, metadata.TopicRecord{Name: t.Name, ID: t.ID})
	}
	for p := first; p < len(t.Partitions); p++ {
		part := t.Partitions[p]
		recs = append(recs, metadata.PartitionRecord{
			TopicID: t.ID, Partition: int32(p),
			Replicas: part.Replicas, ISR: part.ISR, Leader: part.Leader, LeaderEpoch: part.LeaderEpoch,
			PartitionEpoch: part.PartitionEpoch,
		})
	}
	if first == 0 {
		recs = append(recs, configRecords(t.ID, nil, t.Configs)...)
	}
	return recs
}

// configRecords turns a change of overrides from old to new into records,
// sorted by name.
func configRecords(id metadata.UUID, old, new map[string]string) []metadata.Record {
	var names []string
	for n, v := range new {
		if ov, ok := old[n]; !ok || ov != v {
			names = append(names, n)
		}
	}
	for n := range old {
		if _, ok := new[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	recs := make([]metadata.Record, len(names))
	for i, n := range names {
		rec := metadata.ConfigRecord{TopicID: id, Name: n}
		if v, ok := new[n]; ok {
			rec.Value = &v
		}
		recs[i] = rec
	}
	return recs
}

// collisionKey: Kafka's metrics names replace '.' with '_', so "a.b" and
// "a_b" would share metrics; Kafka refuses to create one when the other
// exists, and so does Fjord, so tools built for Kafka behave the same.
func collisionKey(name string) string { return strings.ReplaceAll(name, ".", "_") }

// planBrokerConfigs turns a dynamic broker config change into records:
// for a registered broker or the default (-1), each config named once,
// set to a valid value or deleted.
func planBrokerConfigs(img *metadata.Image, broker int32, ops []controlplane.ConfigOp) ([]metadata.Record, error) {
	if img.MetadataVersion < metadata.BrokerConfigMetadataVersion {
		return nil, fmt.Errorf("%w: dynamic broker configs need metadata version %d; the log is at %d",
			controlplane.ErrInvalidRequest, metadata.BrokerConfigMetadataVersion, img.MetadataVersion)
	}
	if _, ok := img.Brokers[broker]; !ok && broker != -1 {
		return nil, fmt.Errorf("%w: broker %d is not registered", controlplane.ErrInvalidRequest, broker)
	}
	current := img.BrokerConfigs[broker]
	seen := make(map[string]bool, len(ops))
	var recs []metadata.Record
	for _, op := range ops {
		if seen[op.Name] {
			return nil, fmt.Errorf("%w: config %q appears more than once in the request", controlplane.ErrInvalidRequest, op.Name)
		}
		seen[op.Name] = true
		switch op.Op {
		case controlplane.ConfigSet:
			if op.Value == nil {
				return nil, fmt.Errorf("%w: config %q: set with a null value", controlplane.ErrInvalidConfig, op.Name)
			}
			if err := metadata.ValidateBrokerConfig(op.Name, *op.Value); err != nil {
				return nil, err
			}
			if v, ok := current[op.Name]; !ok || v != *op.Value {
				recs = append(recs, metadata.BrokerConfigRecord{Broker: broker, Name: op.Name, Value: op.Value})
			}
		case controlplane.ConfigDelete:
			if _, ok := metadata.DynamicBrokerConfigs[op.Name]; !ok {
				return nil, fmt.Errorf("%w: %q is not a dynamic broker config", controlplane.ErrInvalidConfig, op.Name)
			}
			if _, ok := current[op.Name]; ok {
				recs = append(recs, metadata.BrokerConfigRecord{Broker: broker, Name: op.Name})
			}
		default:
			return nil, fmt.Errorf("%w: broker config %q: %s is not allowed: a broker config is set or deleted",
				controlplane.ErrInvalidConfig, op.Name, opName(op.Op))
		}
	}
	return recs, nil
}

// planConfigs applies ops to a topic's overrides and returns the new
// overrides. replaceAll (legacy AlterConfigs): the Set ops are the new
// complete set. Otherwise (IncrementalAlterConfigs) each op edits the
// current overrides; Append and Subtract work on list configs, starting
// from the default when there is no override, as Kafka does.
// img supplies the topic-config table only.
func planConfigs(img *metadata.Image, current map[string]string, ops []controlplane.ConfigOp, replaceAll bool) (map[string]string, error) {
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if seen[op.Name] {
			return nil, fmt.Errorf("%w: config %q appears more than once in the request", controlplane.ErrInvalidRequest, op.Name)
		}
		seen[op.Name] = true
		if _, ok := img.LookupTopicConfig(op.Name); !ok {
			return nil, fmt.Errorf("%w: unknown topic config %q", controlplane.ErrInvalidConfig, op.Name)
		}
	}
	if replaceAll {
		next := make(map[string]string, len(ops))
		for _, op := range ops {
			if op.Op != controlplane.ConfigSet {
				return nil, fmt.Errorf("%w: AlterConfigs only sets configs (config %q has operation %d)", controlplane.ErrInvalidRequest, op.Name, op.Op)
			}
			if op.Value == nil {
				return nil, fmt.Errorf("%w: config %q has a null value", controlplane.ErrInvalidConfig, op.Name)
			}
			if err := img.ValidateTopicConfig(op.Name, *op.Value); err != nil {
				return nil, err
			}
			next[op.Name] = *op.Value
		}
		return next, nil
	}

	next := make(map[string]string, len(current)+len(ops))
	for k, v := range current {
		next[k] = v
	}
	for _, op := range ops {
		def, _ := img.LookupTopicConfig(op.Name)
		switch op.Op {
		case controlplane.ConfigSet:
			if op.Value == nil {
				return nil, fmt.Errorf("%w: config %q: set with a null value", controlplane.ErrInvalidConfig, op.Name)
			}
			next[op.Name] = *op.Value
		case controlplane.ConfigDelete:
			delete(next, op.Name)
			continue
		case controlplane.ConfigAppend, controlplane.ConfigSubtract:
			if def.Type != "list" {
				return nil, fmt.Errorf("%w: config %q is a %s, not a list: append and subtract apply to list configs only", controlplane.ErrInvalidConfig, op.Name, def.Type)
			}
			if op.Value == nil {
				return nil, fmt.Errorf("%w: config %q: %s with a null value", controlplane.ErrInvalidConfig, op.Name, opName(op.Op))
			}
			cur, ok := next[op.Name]
			if !ok {
				cur = def.Default
			}
			items := topicconfig.SplitList(cur)
			for _, v := range topicconfig.SplitList(*op.Value) {
				if op.Op == controlplane.ConfigAppend && !slices.Contains(items, v) {
					items = append(items, v)
				}
				if op.Op == controlplane.ConfigSubtract {
					items = slices.DeleteFunc(items, func(s string) bool { return s == v })
				}
			}
			next[op.Name] = strings.Join(items, ",")
		default:
			return nil, fmt.Errorf("%w: config %q: unknown operation %d", controlplane.ErrInvalidRequest, op.Name, op.Op)
		}
		if err := img.ValidateTopicConfig(op.Name, next[op.Name]); err != nil {
			return nil, err
		}
	}
	return next, nil
}

func opName(op controlplane.ConfigOpType) string {
	switch op {
	case controlplane.ConfigSet:
		return "set"
	case controlplane.ConfigDelete:
		return "delete"
	case controlplane.ConfigAppend:
		return "append"
	case controlplane.ConfigSubtract:
		return "subtract"
	}
	return "operation " + strconv.Itoa(int(op))
}

// newUUID draws random UUIDs until one is usable: not printed with a
// leading '-' in base64url (Kafka avoids those: they read as flags on a
// command line) and not taken. Version-4 bits are set, as in Kafka's ids,
// which also keeps out the zero UUID and Kafka's reserved metadata topic id
// (0...01).
func newUUID(read func([]byte) (int, error), taken func(metadata.UUID) bool) (metadata.UUID, error) {
	for range 100 {
		var u metadata.UUID
		if _, err := read(u[:]); err != nil {
			return metadata.UUID{}, fmt.Errorf("controller: random id: %w", err)
		}
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
		if strings.HasPrefix(u.Base64(), "-") || taken(u) {
			continue
		}
		return u, nil
	}
	return metadata.UUID{}, fmt.Errorf("controller: no usable random id in 100 draws")
}
