package kafkaserver

// Fetch: v4-16
//
// Reads record batches for consumers and followers through the
// replica manager, which long-polls: it answers once MinBytes are ready,
// MaxWaitMillis passes, or the connection closes, woken by appends and
// high-watermark moves rather than a timer. v4 is the first version that
// carries record batches (magic 2) and the last stable offset, so it is
// the floor (Kafka 4's too); v16 is librdkafka's maximum and above
// kafkajs's and kafka-go's v11, which are kept.
//
// Sessions (v7+, KIP-227) are resolved first (fetch_session.go): a
// session error is the answer's top-level error and nothing is read.
//
// Per partition, in this order: the topic (v13+ by topic id: unknown is
// UNKNOWN_TOPIC_ID; before v13 by name: UNKNOWN_TOPIC_OR_PARTITION), the
// partition (UNKNOWN_TOPIC_OR_PARTITION), then the read, which checks
// leadership and CurrentLeaderEpoch (FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH) and the offset (OFFSET_OUT_OF_RANGE). A fetch
// with an error answers at once rather than waiting, as Kafka does, so a
// client learns of the error without sitting out MaxWait.
//
// Isolation: IsolationLevel 1 (read_committed) reads below the last
// stable offset and answers the aborted transactions that overlap the
// batches returned (producer id and first offset; non-null, empty when
// there are none), which the consumer skips; 0 reads below the high
// watermark and answers null. Every partition carries the last stable
// offset.
//
// Followers: a request from a replica (replica id >= 0, ReplicaState
// from v15) reads to the log end, and its fetch offset tells the leader
// what the follower holds (replica/followers.go). Only another Fjord node
// may send one, as itself (its internal client id); anyone else gets
// CLUSTER_AUTHORIZATION_FAILED, and a broker epoch older than the
// node's registration STALE_BROKER_EPOCH, for the whole response. A
// replica id that is not a replica of the partition is
// NOT_LEADER_OR_FOLLOWER. With LastFetchedEpoch (v12+) the leader checks
// the follower's history against its own and answers DivergingEpoch,
// with no records, where they part (KIP-595).
//
// Authorization (authz.go): a follower's fetch needs CLUSTER_ACTION on
// the cluster (CLUSTER_AUTHORIZATION_FAILED for the whole response), a
// consumer's READ on each topic (TOPIC_AUTHORIZATION_FAILED on its
// partitions; by name before the topic's existence is looked at, by id
// after an unknown id is answered UNKNOWN_TOPIC_ID, ids being no secret).
//
// Byte limits: MaxBytes bounds the answer and PartitionMaxBytes each
// partition, except that the first non-empty partition gets at least one
// whole batch, so a batch larger than the limits still makes progress
// (the replica manager enforces this).
//
// Copies: the replica manager reads batches into pooled buffers, the
// answer's RecordBatches alias them, and the writer encodes the response
// into its write buffer (the one copy the framing costs) before the
// buffers go back to the pool (the release func returned here).
//
// Follower fetching (v11+, KIP-392; replica/selector.go): a consumer's
// fetch carries its rack (any bytes, empty, or 64 KiB from the flexible
// v12; only ever compared), and may be answered by any in-sync replica from its own
// copy below its own high watermark; a replica out of the ISR answers
// NOT_LEADER_OR_FOLLOWER. A leader started with --replica-selector rack
// answers a consumer in another replica's rack with that replica as
// PreferredReadReplica and no records, at once. Older versions read from
// the leader only. Partitions answered NOT_LEADER_OR_FOLLOWER or
// FENCED_LEADER_EPOCH carry the current leader (v12+, KIP-951) and v16
// answers the leader's endpoint.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
)

func handleFetch(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.FetchRequest)
	resp := body.ResponseKind().(*kmsg.FetchResponse)
	usesIDs := req.version >= 13

	// Slices are sized up front: a consumer at the log end fetches often,
	// and growing them by append was most of this handler's allocation.
	nparts := 0
	for i := range body.Topics {
		nparts += len(body.Topics[i].Partitions)
	}
	parts := make([]fetchReqPartition, 0, nparts)
	for i := range body.Topics {
		rt := &body.Topics[i]
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			lastFetched := int32(-1)
			if req.version >= 12 {
				lastFetched = rp.LastFetchedEpoch
			}
			logStart := int64(-1)
			if req.version >= 5 {
				logStart = rp.LogStartOffset
			}
			parts = append(parts, fetchReqPartition{
				key:                fetchKey(usesIDs, rt.Topic, rt.TopicID, rp.Partition),
				fetchOffset:        rp.FetchOffset,
				maxBytes:           rp.PartitionMaxBytes,
				currentLeaderEpoch: rp.CurrentLeaderEpoch,
				lastFetchedEpoch:   lastFetched,
				logStartOffset:     logStart,
			})
		}
	}
	var fc *fetchContext
	if req.version < 7 {
		fc = &fetchContext{parts: parts}
	} else {
		var forgotten []sessionPartKey
		for _, ft := range body.ForgottenTopics {
			for _, p := range ft.Partitions {
				forgotten = append(forgotten, fetchKey(usesIDs, ft.Topic, ft.TopicID, p))
			}
		}
		fc = s.sessions.newContext(body.SessionID, body.SessionEpoch, usesIDs, parts, forgotten)
	}
	if fc.errCode != 0 {
		resp.ErrorCode = fc.errCode
		return resp, nil, nil
	}
	resp.SessionID = fc.sessionID

	replicaID, replicaEpoch := body.ReplicaID, int64(-1)
	if req.version >= 15 {
		replicaID, replicaEpoch = body.ReplicaState.ID, body.ReplicaState.Epoch
	}
	if replicaID >= 0 {
		// A follower's fetch reads past the high watermark and counts
		// toward it: only another Fjord node, as itself, may send one.
		// An outside client naming a replica id could otherwise make
		// the leader count copies that do not exist.
		if node, ok := s.internalPeer(req); !ok || node != replicaID {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil, nil
		}
		// And the node's principal may act for the cluster.
		if !s.allowedCluster(req, acl.OperationClusterAction) {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil, nil
		}
		if b, ok := s.image().Brokers[replicaID]; ok && replicaEpoch >= 0 && replicaEpoch < b.Epoch {
			// A process since replaced by a new registration.
			resp.ErrorCode = kerr.StaleBrokerEpoch.Code
			return resp, nil, nil
		}
	}
	// A consumer still owing a wait for its quota is answered at once
	// with nothing (quota.go).
	fq := s.fetchQuotaFor(req, replicaID)
	if owed := fq.owed(s); owed > 0 {
		req.throttle = owed
		return throttledFetch(resp, fc.sessionID), nil, nil
	}
	params := replica.FetchParams{
		ReplicaID:    replicaID,
		ReplicaEpoch: replicaEpoch,
		MaxWait:      time.Duration(max(body.MaxWaitMillis, 0)) * time.Millisecond,
		MinBytes:     body.MinBytes,
		MaxBytes:     body.MaxBytes,
		Isolation:    replica.IsolationHighWatermark,
	}
	if req.conn != nil && req.conn.sendfile {
		params.MinRangeBytes = s.cfg.SendfileMinBytes
	}
	params.MaxBytes = fq.capBytes(s, params.MaxBytes)
	switch {
	case replicaID >= 0:
		params.Isolation = replica.IsolationLogEnd
	case body.IsolationLevel == 1:
		params.Isolation = replica.IsolationTxnCommitted
	}
	if replicaID < 0 && req.version >= 11 {
		// Kafka's rule: v11 brought the rack, and with it reads from
		// any in-sync replica; before it, the leader only.
		params.Client = &replica.ClientMetadata{RackID: body.Rack}
	}

	// Resolve topics at the edge; the rest go to the replica manager.
	img := s.image()
	names := make([]string, len(fc.parts))
	ids := make([]metadata.UUID, len(fc.parts))
	edgeErr := make([]error, len(fc.parts))
	reads := make([]replica.FetchPartition, 0, len(fc.parts))
	readIdx := make([]int, 0, len(fc.parts)) // reads[k] answers fc.parts[readIdx[k]]
	// A consumer needs READ on each topic (a follower was authorized
	// for the cluster above). Parts come grouped by topic, so the last
	// answer is kept rather than a map per fetch.
	consumer := replicaID < 0 && s.authzBase != nil
	lastName, lastAllowed := "", false
	system := s.systemTopicReads(req) // and DESCRIBE_CONFIGS on the cluster for a system topic (authz_system.go)
	mayRead := func(name string) bool {
		if !consumer {
			return true
		}
		if name != lastName || lastName == "" {
			lastName, lastAllowed = name, s.allowedTopic(req, acl.OperationRead, name) && system.allowed(name)
		}
		return lastAllowed
	}
	for i, p := range fc.parts {
		var t *metadata.Topic
		var ok bool
		if usesIDs {
			ids[i] = p.key.topicID
			if t, ok = lookupTopicID(img, p.key.topicID); !ok {
				edgeErr[i] = replica.ErrUnknownTopicID
				continue
			}
		} else {
			names[i] = p.key.topic
			// Authorization before existence: by name, a topic the
			// principal may not read is refused whether or not it
			// exists.
			if !mayRead(p.key.topic) {
				edgeErr[i] = kerr.TopicAuthorizationFailed
				continue
			}
			if t, ok = lookupTopic(img, p.key.topic); !ok {
				edgeErr[i] = replica.ErrUnknownTopicOrPartition
				continue
			}
		}
		if usesIDs && !mayRead(t.Name) {
			edgeErr[i] = kerr.TopicAuthorizationFailed
			continue
		}
		names[i], ids[i] = t.Name, t.ID
		if !partitionExists(t, p.key.partition) {
			edgeErr[i] = replica.ErrUnknownTopicOrPartition
			continue
		}
		reads = append(reads, replica.FetchPartition{
			Topic:              t.Name,
			TopicID:            t.ID,
			Partition:          p.key.partition,
			FetchOffset:        p.fetchOffset,
			CurrentLeaderEpoch: p.currentLeaderEpoch,
			MaxBytes:           p.maxBytes,
			LastFetchedEpoch:   p.lastFetchedEpoch,
			LogStartOffset:     p.logStartOffset,
		})
		readIdx = append(readIdx, i)
	}
	if len(reads) < len(fc.parts) {
		params.MaxWait = 0 // an error to report: answer now
	}

	var result *replica.FetchResult
	if len(reads) > 0 {
		result = s.replicas.Fetch(ctx, params, reads)
		req.parked += result.Waited
	} else if len(fc.parts) == 0 && params.MaxWait > 0 {
		// An incremental fetch with nothing in its session: there is
		// nothing to wake us, so honour MaxWait rather than have the
		// client spin.
		t := time.NewTimer(params.MaxWait)
		select {
		case <-t.C: // waited the client's MaxWait
		case <-ctx.Done(): // connection or server closing
		}
		t.Stop()
		req.parked += params.MaxWait
	}

	// Per part: the answer and its session state.
	answers := make([]kmsg.FetchResponseTopicPartition, len(fc.parts))
	states := make([]partState, len(fc.parts))
	var ranges []storage.FileRange              // ranges[i]: parts[i]'s, when it has one
	lastOffsets := make([]int64, len(fc.parts)) // the last offset in each part's answer
	fromFollower := make([]bool, len(fc.parts)) // read from this node's copy as a follower
	for i, p := range fc.parts {
		a := kmsg.NewFetchResponseTopicPartition()
		a.Partition = p.key.partition
		a.HighWatermark = -1
		// Never null: librdkafka reads a null record set (size -1) in
		// Fetch v4+ as a protocol parse failure, drops the response, and
		// so never learns that an empty partition is at its end (kcat -e
		// then never exits). Kafka sends an empty set, errors included.
		a.RecordBatches = []byte{}
		if edgeErr[i] != nil {
			a.ErrorCode = errorCode(edgeErr[i])
		}
		answers[i] = a
	}
	for k, i := range readIdx {
		a := &answers[i]
		if result == nil || k >= len(result.Partitions) {
			// The replica manager answered fewer partitions than asked:
			// a bug there, answered with a retriable code.
			a.ErrorCode = kerr.NotLeaderForPartition.Code
			continue
		}
		r := &result.Partitions[k]
		if r.Err != nil {
			a.ErrorCode = s.errorCodeLogged(r.Err, "Fetch", "topic", reads[k].Topic, "partition", reads[k].Partition)
			if replicaID >= 0 {
				// A follower behind the log start learns it here.
				a.HighWatermark, a.LogStartOffset = r.HighWatermark, r.LogStartOffset
			}
			continue
		}
		a.HighWatermark = r.HighWatermark
		a.LastStableOffset = r.LastStableOffset
		a.LogStartOffset = r.LogStartOffset
		if r.DivergingEpoch.Epoch >= 0 {
			a.DivergingEpoch.Epoch, a.DivergingEpoch.EndOffset = r.DivergingEpoch.Epoch, r.DivergingEpoch.EndOffset
		}
		lastOffsets[i], fromFollower[i] = r.LastOffset, r.FromFollower
		if r.Redirect {
			a.PreferredReadReplica = r.PreferredReadReplica
		}
		if r.Range.File != nil {
			if ranges == nil {
				ranges = make([]storage.FileRange, len(fc.parts))
			}
			ranges[i] = r.Range
			a.RecordBatches = rangePlaceholder
		} else if len(r.Records) > 0 {
			a.RecordBatches = r.Records
		}
		if params.Isolation == replica.IsolationTxnCommitted {
			a.AbortedTransactions = make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(r.AbortedTxns))
			for j, t := range r.AbortedTxns {
				a.AbortedTransactions[j] = kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset}
			}
		}
	}
	leaders := make(map[int32]bool)
	for i := range answers {
		a := &answers[i]
		states[i] = partState{
			errCode:          a.ErrorCode,
			highWatermark:    a.HighWatermark,
			lastStableOffset: a.LastStableOffset,
			logStartOffset:   a.LogStartOffset,
			hasRecords:       len(a.RecordBatches) > 0,
			redirects:        a.PreferredReadReplica >= 0,
		}
		if req.version >= 12 && (a.ErrorCode == kerr.NotLeaderForPartition.Code || a.ErrorCode == kerr.FencedLeaderEpoch.Code) {
			if t, ok := lookupTopic(img, names[i]); ok {
				if p, ok := lookupPartition(t, a.Partition); ok && p.Leader >= 0 {
					a.CurrentLeader.LeaderID = p.Leader
					a.CurrentLeader.LeaderEpoch = p.LeaderEpoch
					leaders[p.Leader] = true
				}
			}
		}
	}
	include := fc.update(states)

	// Group the included partitions by topic, keeping part order (a full
	// fetch: request order; incremental: session order). Ranges go in
	// the same order, the order the writer meets their placeholders.
	var sent []storage.FileRange
	sentBytes := 0
	for i := range answers {
		if !include[i] {
			continue
		}
		size := len(answers[i].RecordBatches)
		if ranges != nil && ranges[i].File != nil {
			sent = append(sent, ranges[i])
			size = ranges[i].Size
		}
		if size > 0 && replicaID < 0 {
			s.metrics.fetched(names[i], size, fc.parts[i].fetchOffset, lastOffsets[i], fromFollower[i])
			sentBytes += size
		}
		n := len(resp.Topics)
		if n == 0 || !sameFetchTopic(&resp.Topics[n-1], fc.parts[i].key, usesIDs) {
			rt := kmsg.NewFetchResponseTopic()
			if usesIDs {
				rt.TopicID = fc.parts[i].key.topicID
			} else {
				rt.Topic = fc.parts[i].key.topic
			}
			// Room for this topic's run of included parts.
			run := 0
			for k := i; k < len(answers) && (!include[k] || sameFetchTopicKey(fc.parts[k].key, fc.parts[i].key, usesIDs)); k++ {
				if include[k] {
					run++
				}
			}
			rt.Partitions = make([]kmsg.FetchResponseTopicPartition, 0, run)
			resp.Topics = append(resp.Topics, rt)
			n++
		}
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, answers[i])
	}
	if req.version >= 16 {
		for id := range leaders {
			if b, ok := img.Broker(id); ok {
				rb := kmsg.NewFetchResponseBroker()
				rb.NodeID = b.NodeID
				if rb.Host, rb.Port, ok = req.endpoint(b); !ok {
					continue
				}
				if b.Rack != "" {
					rack := b.Rack
					rb.Rack = &rack
				}
				resp.Brokers = append(resp.Brokers, rb)
			}
		}
	}
	req.throttle = fq.charge(s, sentBytes)
	if result == nil {
		return resp, nil, nil
	}
	// RecordBatches alias result's pooled buffers, and ranges hold its
	// descriptors, until the writer has written the response.
	if len(sent) > 0 {
		return &rangedFetch{FetchResponse: resp, ranges: sent}, result.Release, nil
	}
	return resp, result.Release, nil
}

// fetchKey names a partition the way the request version does.
func fetchKey(usesIDs bool, topic string, topicID [16]byte, partition int32) sessionPartKey {
	if usesIDs {
		return sessionPartKey{topicID: topicID, partition: partition}
	}
	return sessionPartKey{topic: topic, partition: partition}
}

func sameFetchTopicKey(a, b sessionPartKey, usesIDs bool) bool {
	if usesIDs {
		return a.topicID == b.topicID
	}
	return a.topic == b.topic
}

func sameFetchTopic(rt *kmsg.FetchResponseTopic, k sessionPartKey, usesIDs bool) bool {
	if usesIDs {
		return rt.TopicID == k.topicID
	}
	return rt.Topic == k.topic
}
