package controller

import (
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"slices"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// The operations. Each is a change of the active controller
// (beginChange): it validates under the active controller's proposeMu
// against the applied image and commits its records as one Raft entry,
// so concurrent requests are serialized: two creates of one name give one
// TOPIC_ALREADY_EXISTS.
// Validation order follows Kafka's: request shape, topic name, existence,
// partitions and replication, assignments, configs.

// CreateTopics creates topics; results[i] answers topics[i]. Every topic
// that passes validation is created in one Raft entry (each topic with its
// partitions and configs). With validateOnly nothing is created and each
// Topic is what would be (its ID still zero: ids are drawn at creation).
func (c *Controller) CreateTopics(ctx context.Context, topics []controlplane.CreateTopic, validateOnly bool) []controlplane.CreateTopicResult {
	results := make([]controlplane.CreateTopicResult, len(topics))
	fail := func(err error) []controlplane.CreateTopicResult {
		for i := range results {
			if results[i].Err == nil {
				results[i] = controlplane.CreateTopicResult{Err: err}
			}
		}
		return results
	}
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return fail(err)
	}
	defer a.proposeMu.Unlock()

	count := make(map[string]int, len(topics))
	for _, t := range topics {
		count[t.Name]++
	}
	// Names taken, by collision key, including this request's accepted ones.
	taken := make(map[string]string, len(img.Topics)+len(topics))
	for name := range img.Topics {
		taken[collisionKey(name)] = name
	}
	usedIDs := func(u metadata.UUID) bool { _, ok := img.TopicsByID[u]; return ok }
	newIDs := map[metadata.UUID]bool{}
	def := topicDefaults{numPartitions: c.cfg.NumPartitions, replicationFactor: c.cfg.ReplicationFactor}

	var recs []metadata.Record
	var created []int
	for i, req := range topics {
		t, err := c.planCreate(img, req, count[req.Name], taken, def)
		if err != nil {
			results[i].Err = err
			continue
		}
		taken[collisionKey(t.Name)] = t.Name
		if !validateOnly {
			t.ID, err = newUUID(rand.Read, func(u metadata.UUID) bool { return usedIDs(u) || newIDs[u] })
			if err != nil {
				results[i].Err = err
				continue
			}
			newIDs[t.ID] = true
			recs = append(recs, topicRecords(t, 0)...)
			created = append(created, i)
		}
		results[i].Topic = t
	}
	if len(created) == 0 {
		return results
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		for _, i := range created {
			results[i] = controlplane.CreateTopicResult{Err: err}
		}
		return results
	}
	pub := c.Image()
	for _, i := range created {
		t, ok := pub.Topic(results[i].Topic.Name)
		if !ok {
			panic(fmt.Sprintf("controller: topic %q committed but missing from the published image (offset %d)", results[i].Topic.Name, pub.Offset))
		}
		results[i].Topic = t
		attrs := []any{"topic", t.Name, "topic_id", t.ID.Base64(), "partitions", len(t.Partitions),
			"replication_factor", t.ReplicationFactor(), "configs", t.Configs}
		if want := def.defaultReplicationFactor(math.MaxInt); topics[i].ReplicationFactor == -1 && t.ReplicationFactor() < want {
			// Capped at the brokers registered: said, so a topic
			// created while a cluster was still starting is not
			// mistaken for a replicated one. Not a warning: on a
			// single node every topic is capped, by design.
			attrs = append(attrs, "default_replication_factor", want, "registered_brokers", len(img.Brokers))
		}
		c.log.Info("created topic", attrs...)
	}
	return results
}

// planCreate validates one controlplane.CreateTopic against img and the
// names already taken; the returned topic has no id yet.
func (c *Controller) planCreate(img *metadata.Image, req controlplane.CreateTopic, sameName int, taken map[string]string, def topicDefaults) (*metadata.Topic, error) {
	if sameName > 1 {
		return nil, fmt.Errorf("%w: topic %q appears %d times in the request", controlplane.ErrInvalidRequest, req.Name, sameName)
	}
	if err := metadata.ValidateTopicName(req.Name); err != nil {
		return nil, err
	}
	if _, ok := img.Topic(req.Name); ok {
		return nil, fmt.Errorf("%w: topic %q already exists", controlplane.ErrTopicExists, req.Name)
	}
	if other, ok := taken[collisionKey(req.Name)]; ok {
		return nil, fmt.Errorf("%w: topic %q collides with existing topic %q ('.' and '_' are the same in metric names)", controlplane.ErrInvalidTopic, req.Name, other)
	}
	if internal, ok := internalCollisions[collisionKey(req.Name)]; ok && internal != req.Name {
		// Taken first, "__consumer.offsets" would keep
		// __consumer_offsets from ever being created.
		return nil, fmt.Errorf("%w: topic %q collides with internal topic %q ('.' and '_' are the same in metric names)", controlplane.ErrInvalidTopic, req.Name, internal)
	}
	parts, configs, err := planTopic(img, req, def)
	if err != nil {
		return nil, err
	}
	return &metadata.Topic{Name: req.Name, Partitions: parts, Configs: configs}, nil
}

// internalCollisions maps the collision key of each internal topic to
// its name.
var internalCollisions = func() map[string]string {
	m := map[string]string{}
	for _, n := range metadata.InternalTopics() {
		m[collisionKey(n)] = n
	}
	return m
}()

// DeleteTopics deletes topics by name; errs[i] answers names[i]. The
// topics found are removed in one Raft entry.
func (c *Controller) DeleteTopics(ctx context.Context, names []string) (errs []error) {
	errs = make([]error, len(names))
	ids := make([]metadata.UUID, len(names))
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return fill(errs, err)
	}
	defer a.proposeMu.Unlock()
	count := make(map[string]int, len(names))
	for _, n := range names {
		count[n]++
	}
	for i, n := range names {
		t, ok := img.Topic(n)
		switch {
		case count[n] > 1:
			errs[i] = fmt.Errorf("%w: topic %q appears %d times in the request", controlplane.ErrInvalidRequest, n, count[n])
		case metadata.IsInternalTopic(n):
			errs[i] = refuseDeleteInternal(n)
		case !ok:
			errs[i] = fmt.Errorf("%w: topic %q does not exist", controlplane.ErrUnknownTopic, n)
		default:
			ids[i] = t.ID
		}
	}
	c.deleteLocked(ctx, a, img, ids, errs)
	return errs
}

// DeleteTopicsByID deletes topics by id; names[i] and errs[i] answer
// ids[i] (the name is "" for an unknown id).
func (c *Controller) DeleteTopicsByID(ctx context.Context, ids []metadata.UUID) (names []string, errs []error) {
	names = make([]string, len(ids))
	errs = make([]error, len(ids))
	found := make([]metadata.UUID, len(ids))
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return names, fill(errs, err)
	}
	defer a.proposeMu.Unlock()
	count := make(map[metadata.UUID]int, len(ids))
	for _, id := range ids {
		count[id]++
	}
	for i, id := range ids {
		t, ok := img.TopicByID(id)
		if ok {
			names[i] = t.Name
		}
		switch {
		case id.IsZero():
			errs[i] = fmt.Errorf("%w: zero topic id", controlplane.ErrInvalidRequest)
		case count[id] > 1:
			errs[i] = fmt.Errorf("%w: topic id %s appears %d times in the request", controlplane.ErrInvalidRequest, id, count[id])
		case !ok:
			errs[i] = fmt.Errorf("%w: no topic with id %s", controlplane.ErrUnknownTopicID, id)
		case metadata.IsInternalTopic(t.Name):
			errs[i] = refuseDeleteInternal(t.Name)
		default:
			found[i] = id
		}
	}
	c.deleteLocked(ctx, a, img, found, errs)
	return names, errs
}

// refuseDeleteInternal is the answer to deleting internal topic name,
// whether or not it exists yet: what a coordinator or the HTTP gateway
// keeps there (every group's offsets, the idempotency index) would go
// with it, for every client at once.
func refuseDeleteInternal(name string) error {
	return metadata.InternalTopicError(name, "deleting it would lose the state it holds (committed offsets, idempotency keys) for every client")
}

// deleteLocked removes the topics with non-zero ids[i] whose errs[i] is
// nil, in one entry, and sets their errs on failure.
// REQUIRES: a.proposeMu held.
func (c *Controller) deleteLocked(ctx context.Context, a *activeController, img *metadata.Image, ids []metadata.UUID, errs []error) {
	var recs []metadata.Record
	for i, id := range ids {
		if errs[i] == nil && !id.IsZero() {
			recs = append(recs, metadata.RemoveTopicRecord{TopicID: id})
		}
	}
	if len(recs) == 0 {
		return
	}
	err := a.proposeLocked(ctx, c, recs)
	for i, id := range ids {
		if errs[i] != nil || id.IsZero() {
			continue
		}
		if err != nil {
			errs[i] = err
			continue
		}
		c.log.Info("deleted topic", "topic", img.TopicsByID[id].Name, "topic_id", id.Base64())
	}
}

// CreatePartitions grows topic to count partitions. assignments, if given,
// places the new partitions (one replica list per new partition, each as
// long as the topic's replication factor); otherwise placeReplicas places
// them, continuing the spread of the topic's existing partitions.
func (c *Controller) CreatePartitions(ctx context.Context, topic string, count int32, assignments [][]int32, validateOnly bool) error {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return err
	}
	defer a.proposeMu.Unlock()
	if metadata.IsInternalTopic(topic) {
		return metadata.RefuseInternalPartitions(topic)
	}
	t, ok := img.Topic(topic)
	if !ok {
		return fmt.Errorf("%w: topic %q does not exist", controlplane.ErrUnknownTopic, topic)
	}
	cur := int32(len(t.Partitions))
	switch {
	case count == cur:
		return fmt.Errorf("%w: topic %q already has %d partitions", controlplane.ErrInvalidPartitions, topic, cur)
	case count < cur:
		return fmt.Errorf("%w: topic %q has %d partitions; the count can only grow (asked for %d)", controlplane.ErrInvalidPartitions, topic, cur, count)
	case count > MaxPartitionsPerTopic:
		return fmt.Errorf("%w: %d partitions (at most %d)", controlplane.ErrInvalidPartitions, count, MaxPartitionsPerTopic)
	}
	rf := len(t.Partitions[0].Replicas)
	var replicas [][]int32
	if len(assignments) > 0 {
		if int32(len(assignments)) != count-cur {
			return fmt.Errorf("%w: %d assignments for %d new partitions", controlplane.ErrInvalidReplicaAssignment, len(assignments), count-cur)
		}
		if _, err := checkAssignments(img, assignments, rf); err != nil {
			return err
		}
		replicas = assignments
	} else {
		brokers := registeredBrokers(img)
		if err := checkReplicationFactor(brokers, rf); err != nil {
			return err
		}
		existing := make([][]int32, cur)
		for p := range existing {
			existing[p] = t.Partitions[p].Replicas
		}
		replicas = placeReplicas(brokers, topic, existing, int(count-cur), rf)
	}
	if validateOnly {
		return nil
	}
	grown := &metadata.Topic{Name: t.Name, ID: t.ID, Partitions: append(slices.Clip(t.Partitions), newPartitions(img, replicas)...)}
	if err := a.proposeLocked(ctx, c, topicRecords(grown, int(cur))); err != nil {
		return err
	}
	c.log.Info("created partitions", "topic", topic, "from", cur, "to", count)
	return nil
}

// AlterBrokerConfigs changes broker's dynamic configs (-1: the cluster
// default). Each op sets or deletes one config; deleting one that is
// not set commits nothing.
func (c *Controller) AlterBrokerConfigs(ctx context.Context, broker int32, ops []controlplane.ConfigOp, validateOnly bool) error {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return err
	}
	defer a.proposeMu.Unlock()
	recs, err := planBrokerConfigs(img, broker, ops)
	if err != nil || validateOnly || len(recs) == 0 {
		return err
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		return err
	}
	c.log.Info("altered broker configs", "broker", broker, "records", len(recs))
	return nil
}

// AlterConfigs changes topic's config overrides; see planConfigs for the
// two modes. A change that leaves the overrides as they are commits
// nothing.
func (c *Controller) AlterConfigs(ctx context.Context, topic string, ops []controlplane.ConfigOp, replaceAll, validateOnly bool) error {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return err
	}
	defer a.proposeMu.Unlock()
	t, ok := img.Topic(topic)
	if !ok {
		return fmt.Errorf("%w: topic %q does not exist", controlplane.ErrUnknownTopic, topic)
	}
	next, err := planConfigs(img, t.Configs, ops, replaceAll)
	if err != nil {
		return err
	}
	if err := img.CheckInternalTopicConfigs(topic, t.Configs, next); err != nil {
		return err
	}
	recs := configRecords(t.ID, t.Configs, next)
	if validateOnly || len(recs) == 0 {
		return nil
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		return err
	}
	c.log.Info("altered topic configs", "topic", topic, "configs", next)
	return nil
}

// AllocateProducerIDs commits the next block of ProducerIDBlockSize
// producer ids to nodeID and returns it: [first, first+count). Blocks
// never overlap, across restarts too, since each is in the metadata log.
func (c *Controller) AllocateProducerIDs(ctx context.Context, nodeID int32) (first, count int64, err error) {
	if nodeID < 0 {
		return 0, 0, fmt.Errorf("%w: node id %d", controlplane.ErrInvalidRequest, nodeID)
	}
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return 0, 0, err
	}
	defer a.proposeMu.Unlock()
	first = img.NextProducerID
	if first > math.MaxInt64-ProducerIDBlockSize {
		return 0, 0, fmt.Errorf("controller: producer ids exhausted at %d", first)
	}
	rec := metadata.ProducerIDsRecord{NodeID: nodeID, NextProducerID: first + ProducerIDBlockSize}
	if err := a.proposeLocked(ctx, c, []metadata.Record{rec}); err != nil {
		return 0, 0, err
	}
	return first, ProducerIDBlockSize, nil
}

// MarkTopicKeyed implements controlplane.Client: it commits
// TopicKeyedRecord for the topic unless it is keyed already. Repeats are
// expected (every node leading one of the topic's partitions may ask,
// and a node asks again after a lost answer), so a keyed topic answers
// nil without a proposal: the metadata log holds one mark per topic.
func (c *Controller) MarkTopicKeyed(ctx context.Context, id metadata.UUID) error {
	if id.IsZero() {
		return fmt.Errorf("%w: zero topic id", controlplane.ErrInvalidRequest)
	}
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return err
	}
	defer a.proposeMu.Unlock()
	if img.MetadataVersion < metadata.KeyedTopicsMetadataVersion {
		return fmt.Errorf("%w: marking a topic keyed needs metadata version %d; the log is at %d",
			controlplane.ErrInvalidRequest, metadata.KeyedTopicsMetadataVersion, img.MetadataVersion)
	}
	t, ok := img.TopicByID(id)
	switch {
	case !ok:
		return fmt.Errorf("%w: no topic with id %s", controlplane.ErrUnknownTopicID, id)
	case t.Keyed:
		return nil
	}
	return a.proposeLocked(ctx, c, []metadata.Record{metadata.TopicKeyedRecord{TopicID: id}})
}

func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}
