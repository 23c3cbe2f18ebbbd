package forward

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// The changes, each as the Kafka request Fjord's own listener serves
// (kafkaserver). Every request is built for the newest version and
// franz-go encodes it for the version both nodes speak; the fields that
// exist only in older versions (DeleteTopics' TopicNames) are filled as
// well, so a node speaking an older version still understands it.

// do runs one change: locally while this node is the active controller,
// else through remote; again after a retriable error until ctx or
// MaxWait ends, when the last error is returned.
func (c *Client) do(ctx context.Context, local, remote func(context.Context) error) error {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	backoff := retryMin
	for {
		var err error
		if c.local(ctx) {
			err = local(ctx)
		} else {
			err = remote(ctx)
		}
		if !retriable(err) || controlplane.IsLocalOnly(ctx) || !pause(ctx, &backoff) {
			return err
		}
	}
}

// CreateTopics implements controlplane.Client. Topics are retried one by
// one: a retriable answer for one does not repeat the others.
func (c *Client) CreateTopics(ctx context.Context, topics []controlplane.CreateTopic, validateOnly bool) []controlplane.CreateTopicResult {
	ctx, cancel := c.bound(ctx)
	defer cancel()
	results := make([]controlplane.CreateTopicResult, len(topics))
	pending := make([]int, len(topics))
	for i := range pending {
		pending[i] = i
	}
	backoff := retryMin
	for {
		sub := make([]controlplane.CreateTopic, len(pending))
		for j, i := range pending {
			sub[j] = topics[i]
		}
		var got []controlplane.CreateTopicResult
		if c.local(ctx) {
			got = c.cfg.Local.CreateTopics(ctx, sub, validateOnly)
		} else {
			got = c.createTopicsRemote(ctx, sub, validateOnly)
		}
		var again []int
		for j, i := range pending {
			results[i] = got[j]
			if retriable(got[j].Err) {
				again = append(again, i)
			}
		}
		if len(again) == 0 || controlplane.IsLocalOnly(ctx) || !pause(ctx, &backoff) {
			return results
		}
		pending = again
	}
}

func (c *Client) createTopicsRemote(ctx context.Context, topics []controlplane.CreateTopic, validateOnly bool) []controlplane.CreateTopicResult {
	out := make([]controlplane.CreateTopicResult, len(topics))
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = timeoutMillis(ctx)
	req.ValidateOnly = validateOnly
	for _, t := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = t.Name, t.NumPartitions, t.ReplicationFactor
		if len(t.Assignments) > 0 {
			rt.NumPartitions, rt.ReplicationFactor = -1, -1
			for p, replicas := range t.Assignments {
				a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
				a.Partition, a.Replicas = int32(p), replicas
				rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
			}
		}
		for _, name := range sortedKeys(t.Configs) {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			v := t.Configs[name]
			cfg.Name, cfg.Value = name, &v
			rt.Configs = append(rt.Configs, cfg)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, offset, err := c.send(ctx, req)
	if err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	byName := map[string]*kmsg.CreateTopicsResponseTopic{}
	for i := range resp.(*kmsg.CreateTopicsResponse).Topics {
		rt := &resp.(*kmsg.CreateTopicsResponse).Topics[i]
		byName[rt.Topic] = rt
	}
	created := false
	for i, t := range topics {
		rt, ok := byName[t.Name]
		switch {
		case !ok:
			out[i].Err = fmt.Errorf("%w: the controller's answer leaves out topic %q", controlplane.ErrTimedOut, t.Name)
		case rt.ErrorCode != 0:
			out[i].Err = codeError(rt.ErrorCode, rt.ErrorMessage)
		default:
			out[i].Topic = topicFromResponse(rt)
			created = !validateOnly
		}
	}
	if !created {
		return out
	}
	if err := c.await(ctx, offset); err != nil {
		for i := range out {
			if out[i].Err == nil {
				out[i] = controlplane.CreateTopicResult{Err: err}
			}
		}
		return out
	}
	img := c.cfg.Images.Image()
	for i := range out {
		if t, ok := img.Topics[topics[i].Name]; ok && out[i].Err == nil && t.ID == out[i].Topic.ID {
			out[i].Topic = t
		}
	}
	return out
}

// topicFromResponse is the topic a CreateTopics answer describes (what a
// validate-only request would create, or a created topic this node's
// image has already seen deleted again): its partition count,
// replication factor and config overrides, without replica placement.
func topicFromResponse(rt *kmsg.CreateTopicsResponseTopic) *metadata.Topic {
	t := &metadata.Topic{Name: rt.Topic, ID: rt.TopicID, Configs: map[string]string{}}
	for range max(rt.NumPartitions, 0) {
		replicas := slices.Repeat([]int32{-1}, int(max(rt.ReplicationFactor, 0)))
		t.Partitions = append(t.Partitions, metadata.Partition{Replicas: replicas, Leader: -1})
	}
	for _, cfg := range rt.Configs {
		if cfg.Source == int8(kmsg.ConfigSourceDynamicTopicConfig) && cfg.Value != nil {
			t.Configs[cfg.Name] = *cfg.Value
		}
	}
	return t
}

// DeleteTopics implements controlplane.Client.
func (c *Client) DeleteTopics(ctx context.Context, names []string) []error {
	errs := make([]error, len(names))
	for i, name := range names {
		errs[i] = c.do(ctx, func(ctx context.Context) error {
			return c.cfg.Local.DeleteTopics(ctx, []string{name})[0]
		}, func(ctx context.Context) error {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TimeoutMillis = timeoutMillis(ctx)
			req.TopicNames = []string{name}
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.Topic = &name
			req.Topics = []kmsg.DeleteTopicsRequestTopic{rt}
			_, err := c.deleteRemote(ctx, req)
			return err
		})
	}
	return errs
}

// DeleteTopicsByID implements controlplane.Client.
func (c *Client) DeleteTopicsByID(ctx context.Context, ids []metadata.UUID) ([]string, []error) {
	names, errs := make([]string, len(ids)), make([]error, len(ids))
	for i, id := range ids {
		errs[i] = c.do(ctx, func(ctx context.Context) error {
			n, e := c.cfg.Local.DeleteTopicsByID(ctx, []metadata.UUID{id})
			names[i] = n[0]
			return e[0]
		}, func(ctx context.Context) error {
			req := kmsg.NewPtrDeleteTopicsRequest()
			req.TimeoutMillis = timeoutMillis(ctx)
			rt := kmsg.NewDeleteTopicsRequestTopic()
			rt.TopicID = id
			req.Topics = []kmsg.DeleteTopicsRequestTopic{rt}
			name, err := c.deleteRemote(ctx, req)
			names[i] = name
			return err
		})
	}
	return names, errs
}

// deleteRemote sends a DeleteTopics of one topic and returns its name.
func (c *Client) deleteRemote(ctx context.Context, req *kmsg.DeleteTopicsRequest) (string, error) {
	resp, offset, err := c.send(ctx, req)
	if err != nil {
		return "", err
	}
	topics := resp.(*kmsg.DeleteTopicsResponse).Topics
	if len(topics) != 1 {
		return "", fmt.Errorf("%w: the controller answered %d topics for one", controlplane.ErrTimedOut, len(topics))
	}
	var name string
	if topics[0].Topic != nil {
		name = *topics[0].Topic
	}
	if err := codeError(topics[0].ErrorCode, topics[0].ErrorMessage); err != nil {
		return name, err
	}
	return name, c.await(ctx, offset)
}

// CreatePartitions implements controlplane.Client.
func (c *Client) CreatePartitions(ctx context.Context, topic string, count int32, assignments [][]int32, validateOnly bool) error {
	return c.do(ctx, func(ctx context.Context) error {
		return c.cfg.Local.CreatePartitions(ctx, topic, count, assignments, validateOnly)
	}, func(ctx context.Context) error {
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = timeoutMillis(ctx)
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = topic, count
		for _, replicas := range assignments {
			a := kmsg.NewCreatePartitionsRequestTopicAssignment()
			a.Replicas = replicas
			rt.Assignment = append(rt.Assignment, a)
		}
		req.Topics = []kmsg.CreatePartitionsRequestTopic{rt}
		resp, offset, err := c.send(ctx, req)
		if err != nil {
			return err
		}
		topics := resp.(*kmsg.CreatePartitionsResponse).Topics
		if len(topics) != 1 {
			return fmt.Errorf("%w: the controller answered %d topics for one", controlplane.ErrTimedOut, len(topics))
		}
		if err := codeError(topics[0].ErrorCode, topics[0].ErrorMessage); err != nil || validateOnly {
			return err
		}
		return c.await(ctx, offset)
	})
}

// AlterConfigs implements controlplane.Client: the legacy AlterConfigs
// for replaceAll, IncrementalAlterConfigs otherwise.
func (c *Client) AlterConfigs(ctx context.Context, topic string, ops []controlplane.ConfigOp, replaceAll, validateOnly bool) error {
	return c.do(ctx, func(ctx context.Context) error {
		return c.cfg.Local.AlterConfigs(ctx, topic, ops, replaceAll, validateOnly)
	}, func(ctx context.Context) error {
		return c.alterConfigsRemote(ctx, kmsg.ConfigResourceTypeTopic, topic, ops, replaceAll, validateOnly)
	})
}

// AlterBrokerConfigs implements controlplane.Client with
// IncrementalAlterConfigs on a BROKER resource: named by the broker's
// id, or "" for the cluster default.
func (c *Client) AlterBrokerConfigs(ctx context.Context, broker int32, ops []controlplane.ConfigOp, validateOnly bool) error {
	return c.do(ctx, func(ctx context.Context) error {
		return c.cfg.Local.AlterBrokerConfigs(ctx, broker, ops, validateOnly)
	}, func(ctx context.Context) error {
		name := ""
		if broker >= 0 {
			name = strconv.Itoa(int(broker))
		}
		return c.alterConfigsRemote(ctx, kmsg.ConfigResourceTypeBroker, name, ops, false, validateOnly)
	})
}

// alterConfigsRemote sends one resource's config change to the active
// controller: the legacy AlterConfigs for replaceAll,
// IncrementalAlterConfigs otherwise.
func (c *Client) alterConfigsRemote(ctx context.Context, typ kmsg.ConfigResourceType, name string, ops []controlplane.ConfigOp, replaceAll, validateOnly bool) error {
	var req kmsg.Request
	if replaceAll {
		r := kmsg.NewPtrAlterConfigsRequest()
		r.ValidateOnly = validateOnly
		res := kmsg.NewAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		for _, op := range ops {
			cfg := kmsg.NewAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Value = op.Name, op.Value
			res.Configs = append(res.Configs, cfg)
		}
		r.Resources = []kmsg.AlterConfigsRequestResource{res}
		req = r
	} else {
		r := kmsg.NewPtrIncrementalAlterConfigsRequest()
		r.ValidateOnly = validateOnly
		res := kmsg.NewIncrementalAlterConfigsRequestResource()
		res.ResourceType, res.ResourceName = typ, name
		for _, op := range ops {
			cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
			cfg.Name, cfg.Op, cfg.Value = op.Name, kmsg.IncrementalAlterConfigOp(op.Op), op.Value
			res.Configs = append(res.Configs, cfg)
		}
		r.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res}
		req = r
	}
	resp, offset, err := c.send(ctx, req)
	if err != nil {
		return err
	}
	var code int16
	var msg *string
	switch r := resp.(type) {
	case *kmsg.AlterConfigsResponse:
		if len(r.Resources) != 1 {
			return fmt.Errorf("%w: the controller answered %d resources for one", controlplane.ErrTimedOut, len(r.Resources))
		}
		code, msg = r.Resources[0].ErrorCode, r.Resources[0].ErrorMessage
	case *kmsg.IncrementalAlterConfigsResponse:
		if len(r.Resources) != 1 {
			return fmt.Errorf("%w: the controller answered %d resources for one", controlplane.ErrTimedOut, len(r.Resources))
		}
		code, msg = r.Resources[0].ErrorCode, r.Resources[0].ErrorMessage
	}
	if err := codeError(code, msg); err != nil || validateOnly {
		return err
	}
	return c.await(ctx, offset)
}

// AllocateProducerIDs implements controlplane.Client.
func (c *Client) AllocateProducerIDs(ctx context.Context, nodeID int32) (first, count int64, err error) {
	err = c.do(ctx, func(ctx context.Context) error {
		first, count, err = c.cfg.Local.AllocateProducerIDs(ctx, nodeID)
		return err
	}, func(ctx context.Context) error {
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID = nodeID
		req.BrokerEpoch = -1
		if b, ok := c.cfg.Images.Image().Brokers[nodeID]; ok {
			req.BrokerEpoch = b.Epoch
		}
		resp, offset, err := c.send(ctx, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.AllocateProducerIDsResponse)
		if err := codeError(r.ErrorCode, nil); err != nil {
			return err
		}
		if r.ProducerIDStart < 0 || r.ProducerIDLen <= 0 {
			return fmt.Errorf("%w: the controller answered a block of %d producer ids from %d", controlplane.ErrTimedOut, r.ProducerIDLen, r.ProducerIDStart)
		}
		first, count = r.ProducerIDStart, int64(r.ProducerIDLen)
		return c.await(ctx, offset)
	})
	return first, count, err
}

// registrationListeners is b's listeners as BrokerRegistration carries
// them: the inter-broker one (b.Host, b.Port) first, which the
// controller takes as the inter-broker endpoint.
func registrationListeners(b metadata.BrokerRecord) []kmsg.BrokerRegistrationRequestListener {
	first := kmsg.NewBrokerRegistrationRequestListener()
	first.Name, first.Host, first.Port = "PLAINTEXT", b.Host, uint16(b.Port)
	var rest []kmsg.BrokerRegistrationRequestListener
	for _, e := range b.Listeners {
		l := kmsg.NewBrokerRegistrationRequestListener()
		l.Name, l.Host, l.Port, l.SecurityProtocol = e.Name, e.Host, uint16(e.Port), e.SecurityProtocol
		if e.Host == b.Host && e.Port == b.Port {
			first = l
		} else {
			rest = append(rest, l)
		}
	}
	return append([]kmsg.BrokerRegistrationRequestListener{first}, rest...)
}

// RegisterBroker implements controlplane.Client.
func (c *Client) RegisterBroker(ctx context.Context, b metadata.BrokerRecord) (epoch int64, err error) {
	err = c.do(ctx, func(ctx context.Context) error {
		epoch, err = c.cfg.Local.RegisterBroker(ctx, b)
		return err
	}, func(ctx context.Context) error {
		req := kmsg.NewPtrBrokerRegistrationRequest()
		req.BrokerID = b.NodeID
		req.ClusterID = c.cfg.Images.Image().ClusterID
		req.IncarnationID = b.IncarnationID
		req.Listeners = registrationListeners(b)
		if b.Rack != "" {
			req.Rack = &b.Rack
		}
		resp, offset, err := c.send(ctx, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.BrokerRegistrationResponse)
		if err := codeError(r.ErrorCode, nil); err != nil {
			return err
		}
		epoch = r.BrokerEpoch
		return c.await(ctx, offset)
	})
	return epoch, err
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// BrokerHeartbeat implements controlplane.Client. It changes nothing in
// the metadata log, so there is no image to wait for.
func (c *Client) BrokerHeartbeat(ctx context.Context, hb controlplane.Heartbeat) (controlplane.HeartbeatAnswer, error) {
	var ans controlplane.HeartbeatAnswer
	err := c.do(ctx, func(ctx context.Context) error {
		var err error
		ans, err = c.cfg.Local.BrokerHeartbeat(ctx, hb)
		return err
	}, func(ctx context.Context) error {
		req := kmsg.NewPtrBrokerHeartbeatRequest()
		req.BrokerID, req.BrokerEpoch = hb.NodeID, hb.BrokerEpoch
		req.CurrentMetadataOffset = int64(hb.MetadataOffset)
		req.WantShutdown = hb.WantShutDown
		resp, _, err := c.send(ctx, req)
		if err != nil {
			return err
		}
		r := resp.(*kmsg.BrokerHeartbeatResponse)
		if err := codeError(r.ErrorCode, nil); err != nil {
			return err
		}
		ans = controlplane.HeartbeatAnswer{ShouldShutDown: r.ShouldShutdown}
		if r.IsFenced {
			return controlplane.ErrBrokerFenced
		}
		return nil
	})
	return ans, err
}

// ElectLeaders implements controlplane.Client.
func (c *Client) ElectLeaders(ctx context.Context, req controlplane.ElectLeaders) ([]controlplane.ElectionResult, error) {
	var results []controlplane.ElectionResult
	err := c.do(ctx, func(ctx context.Context) error {
		var err error
		results, err = c.cfg.Local.ElectLeaders(ctx, req)
		return err
	}, func(ctx context.Context) error {
		var err error
		results, err = c.electLeadersRemote(ctx, req)
		return err
	})
	return results, err
}

func (c *Client) electLeadersRemote(ctx context.Context, req controlplane.ElectLeaders) ([]controlplane.ElectionResult, error) {
	kreq := kmsg.NewPtrElectLeadersRequest()
	kreq.ElectionType = int8(req.Type)
	kreq.TimeoutMillis = timeoutMillis(ctx)
	if req.Partitions != nil {
		kreq.Topics = []kmsg.ElectLeadersRequestTopic{} // not nil: nil is every partition
		byTopic := map[string]int{}
		for _, tp := range req.Partitions {
			i, ok := byTopic[tp.Topic]
			if !ok {
				i = len(kreq.Topics)
				byTopic[tp.Topic] = i
				t := kmsg.NewElectLeadersRequestTopic()
				t.Topic = tp.Topic
				kreq.Topics = append(kreq.Topics, t)
			}
			kreq.Topics[i].Partitions = append(kreq.Topics[i].Partitions, tp.Partition)
		}
	}
	resp, offset, err := c.send(ctx, kreq)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.ElectLeadersResponse)
	if err := codeError(r.ErrorCode, nil); err != nil {
		return nil, err
	}
	var results []controlplane.ElectionResult
	elected := false
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			err := codeError(p.ErrorCode, p.ErrorMessage)
			elected = elected || err == nil
			results = append(results, controlplane.ElectionResult{
				TopicPartition: controlplane.TopicPartition{Topic: t.Topic, Partition: p.Partition}, Err: err})
		}
	}
	if elected {
		if err := c.await(ctx, offset); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// AlterPartitionReassignments implements controlplane.Client.
func (c *Client) AlterPartitionReassignments(ctx context.Context, reqs []controlplane.Reassignment) ([]controlplane.ReassignmentResult, error) {
	var results []controlplane.ReassignmentResult
	err := c.do(ctx, func(ctx context.Context) error {
		var err error
		results, err = c.cfg.Local.AlterPartitionReassignments(ctx, reqs)
		return err
	}, func(ctx context.Context) error {
		var err error
		results, err = c.alterPartitionReassignmentsRemote(ctx, reqs)
		return err
	})
	return results, err
}

// alterPartitionReassignmentsRemote sends reqs as one
// AlterPartitionReassignments, each topic's partitions in one entry, and
// answers each in request order. A partition named again is answered
// INVALID_REQUEST here, as the controller answers it, and not sent: the
// controller's answer then names each sent partition once, so it maps
// back by topic and partition.
func (c *Client) alterPartitionReassignmentsRemote(ctx context.Context, reqs []controlplane.Reassignment) ([]controlplane.ReassignmentResult, error) {
	results := make([]controlplane.ReassignmentResult, len(reqs))
	kreq := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	kreq.TimeoutMillis = timeoutMillis(ctx)
	byTopic := map[string]int{}
	sent := make(map[controlplane.TopicPartition]int, len(reqs))
	for i, r := range reqs {
		results[i].TopicPartition = r.TopicPartition
		if _, ok := sent[r.TopicPartition]; ok {
			results[i].Err = fmt.Errorf("%w: %s-%d is named more than once", controlplane.ErrInvalidRequest, r.Topic, r.Partition)
			continue
		}
		sent[r.TopicPartition] = i
		ti, ok := byTopic[r.Topic]
		if !ok {
			ti = len(kreq.Topics)
			byTopic[r.Topic] = ti
			t := kmsg.NewAlterPartitionAssignmentsRequestTopic()
			t.Topic = r.Topic
			kreq.Topics = append(kreq.Topics, t)
		}
		p := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
		p.Partition, p.Replicas = r.Partition, r.Replicas // nil stays null: a cancel
		kreq.Topics[ti].Partitions = append(kreq.Topics[ti].Partitions, p)
	}
	if len(sent) == 0 {
		return results, nil
	}
	resp, offset, err := c.send(ctx, kreq)
	if err != nil {
		return nil, err
	}
	r := resp.(*kmsg.AlterPartitionAssignmentsResponse)
	if err := codeError(r.ErrorCode, r.ErrorMessage); err != nil {
		return nil, err
	}
	answered := make(map[controlplane.TopicPartition]bool, len(sent))
	changed := false
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			tp := controlplane.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			i, ok := sent[tp]
			if !ok || answered[tp] {
				continue // not asked, or answered twice: the first answer stands
			}
			answered[tp] = true
			results[i].Err = codeError(p.ErrorCode, p.ErrorMessage)
			changed = changed || results[i].Err == nil
		}
	}
	for tp, i := range sent {
		if !answered[tp] {
			results[i].Err = fmt.Errorf("%w: the controller's answer leaves out %s-%d", controlplane.ErrTimedOut, tp.Topic, tp.Partition)
		}
	}
	if changed {
		if err := c.await(ctx, offset); err != nil {
			return nil, err
		}
	}
	return results, nil
}
