package kafkaserver

// Produce: v0-11
//
// Appends each partition's record batches through the replica manager
// and answers, per partition, the base offset, the log-append time (-1
// unless the topic uses LogAppendTime), the log start offset, or an
// error code.
//
// Versions: v0-2 are advertised only because librdkafka turns
// compression off when Produce's minimum is above 0 (librdkafka #4956,
// KAFKA-18659); their message sets (magic 0 and 1) are refused per
// partition with UNSUPPORTED_FOR_MESSAGE_FORMAT, as is any magic-0/1 data
// in a later version. Fjord stores only record batch v2, and clients
// that speak v3+ choose it, so the old formats never reach the log.
//
// Per partition, in this order: the topic (unknown: auto-created when
// auto.create.topics.enable is on, else UNKNOWN_TOPIC_OR_PARTITION; a
// name Kafka would refuse: INVALID_TOPIC_EXCEPTION; an internal topic,
// from any client but Config.InternalClientID: INVALID_TOPIC_EXCEPTION,
// as Kafka answers a client's append to one), the partition
// (UNKNOWN_TOPIC_OR_PARTITION), the data's magic, then the append, which
// checks leadership, validates every batch (record.Parse: lengths, CRC,
// max.message.bytes, producer sequence) before writing any, and waits
// for acks. A bad batch fails only its partition and leaves the log
// unchanged. Partitions of one request are appended concurrently.
//
// The records are appended straight out of the request frame: kmsg's
// ReadFrom slices byte fields out of its input, so there is no copy
// between the socket and the log.
//
// acks: 1 and -1 (all) answer when the replica manager says the acks are
// satisfied (acks=1 after the group-committed fsync under
// flush.policy=ack; all when the high watermark passes the batch) or
// TimeoutMillis passes (REQUEST_TIMED_OUT). Any other value is
// INVALID_REQUIRED_ACKS. acks=0 gets no response at all; if any
// partition failed, the connection is closed instead, Kafka's way of
// making a client that reads no answers refresh its metadata.
//
// A request with a transactional id carries a transaction's batches; the
// log checks each against its producer's state (an older epoch is
// refused, so a fenced producer's late writes never land), and a batch
// that would open the producer's transaction on a partition is first
// verified with the transaction's coordinator (KIP-890 part 1,
// produce_verify.go), so no transaction is opened that no coordinator
// will end. On a node that runs no transaction coordinator (and for an empty id),
// such a request is refused per partition with
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED (and a message saying why on
// v8+), which every client treats as fatal for the transactional producer.
// A transactional batch in a request without a transactional id is
// refused the same way, as Kafka refuses one: the log would open a
// transaction that no coordinator ever ends, holding the partition's last
// stable offset (and read_committed consumers) back for good.
//
// Authorization (authz.go): WRITE on the transactional id, when there is
// one, for the whole request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on
// every partition), then WRITE on each topic (TOPIC_AUTHORIZATION_FAILED
// on its partitions), before the topic's existence is looked at; an
// unknown topic is auto-created only with CREATE on the cluster or on
// it. As in Kafka since KIP-679, an idempotent producer's batches need
// no more than WRITE here (InitProducerId checked the rest).
//
// A batch of an idempotent producer pipelined on a connection behind
// one of its batches that was refused before it was written, for a
// reason that may pass (not the leader yet, the lease, too few in-sync
// replicas), is refused the same way where Kafka would answer
// OUT_OF_ORDER_SEQUENCE_NUMBER (produce_pipeline.go says why).
//
// v10+ partitions answered NOT_LEADER_OR_FOLLOWER carry the current
// leader (KIP-951) and the response the leader's endpoint, so the client
// can redirect without a metadata round trip.

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/record"
	"github.com/fjordmq/fjord/internal/replica"
)

// magicOffset is the position of the magic byte in a record batch (and
// in the old message sets): base offset int64, batch length int32,
// partition leader epoch int32 (message sets: offset int64, size int32,
// crc int32), then magic.
const magicOffset = 16

// produceJob is one partition's append and its answer.
type produceJob struct {
	topic     string
	partition int32
	records   []byte
	out       *kmsg.ProduceResponseTopicPartition
	err       error
	result    replica.AppendResult
	// verified: the batch is transactional and goes through
	// StartAppendVerified with guard (produce_verify.go).
	verified bool
	guard    uint64
}

func handleProduce(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.ProduceRequest)
	resp := body.ResponseKind().(*kmsg.ProduceResponse)
	img := s.image()

	internal := s.internalClient(req)
	var refuseAll error
	switch {
	case body.TransactionID != nil && s.cfg.Transactions == nil:
		refuseAll = errTransactionsUnsupported
	case body.TransactionID != nil && *body.TransactionID == "":
		refuseAll = errEmptyTransactionalID
	case body.Acks != 0 && body.Acks != 1 && body.Acks != -1:
		refuseAll = replica.ErrInvalidRequiredAcks
	case req.version < 3:
		refuseAll = errOldMessageFormat
	case body.TransactionID != nil && !s.allowedTxnID(req, acl.OperationWrite, *body.TransactionID):
		refuseAll = errTxnIDNotAuthorized
	}

	// WRITE on each topic, once per distinct name, before anything
	// about the topic is looked at; a denied topic is neither created
	// nor appended to.
	denied := make(map[string]bool)
	if refuseAll == nil {
		system := s.systemTopicWrites(req) // and ALTER on the cluster for a system topic (authz_system.go)
		for _, rt := range body.Topics {
			if _, seen := denied[rt.Topic]; !seen {
				denied[rt.Topic] = !s.allowedTopic(req, acl.OperationWrite, rt.Topic) || !system.allowed(rt.Topic)
			}
		}
	}

	// Unknown topics to auto-create before any append.
	var toCreate []string
	if refuseAll == nil && s.cfg.AutoCreateTopics {
		seen := make(map[string]bool)
		for _, rt := range body.Topics {
			if _, ok := lookupTopic(img, rt.Topic); !ok && !seen[rt.Topic] && !denied[rt.Topic] && !metadata.IsInternalTopic(rt.Topic) {
				seen[rt.Topic] = true
				if !s.mayCreateTopic(req, rt.Topic) {
					// Kafka answers a topic it may not auto-create
					// TOPIC_AUTHORIZATION_FAILED.
					denied[rt.Topic] = true
					continue
				}
				toCreate = append(toCreate, rt.Topic)
			}
		}
	}
	var created map[string]autoCreated
	if len(toCreate) > 0 {
		created = s.autoCreateTopics(ctx, toCreate, "Produce")
		img = s.image()
	}
	if refuseAll == nil {
		img = s.awaitMigrationCutover(ctx, img, body, denied)
	}

	type key struct {
		topic     string
		partition int32
	}
	seen := make(map[key]bool)
	var jobs []*produceJob
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(body.Topics))
	for i := range body.Topics {
		rt := &body.Topics[i]
		out := &resp.Topics[i]
		out.Topic = rt.Topic
		out.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(rt.Partitions))
		t, topicKnown := lookupTopic(img, rt.Topic)
		for j := range rt.Partitions {
			rp := &rt.Partitions[j]
			op := &out.Partitions[j]
			*op = kmsg.NewProduceResponseTopicPartition()
			op.Partition = rp.Partition
			op.BaseOffset = -1
			job := &produceJob{topic: rt.Topic, partition: rp.Partition, records: rp.Records, out: op}
			jobs = append(jobs, job)
			switch {
			case refuseAll != nil:
				job.err = refuseAll
			case denied[rt.Topic]:
				job.err = errTopicNotAuthorized
			case metadata.IsInternalTopic(rt.Topic) && !internal:
				// Kafka refuses client appends to its internal
				// topics, whether or not they exist yet; only their
				// owners write there: the group coordinator in
				// process, the HTTP gateway as InternalClientID.
				job.err = metadata.InternalTopicError(rt.Topic, "clients cannot produce to it")
			case !topicKnown:
				job.err = unknownProduceTopic(rt.Topic, created)
			case !partitionExists(t, rp.Partition):
				job.err = replica.ErrUnknownTopicOrPartition
			case seen[key{rt.Topic, rp.Partition}]:
				// Kafka keys a produce by partition, so a partition
				// given twice has no defined order; refuse the repeat
				// rather than guess one.
				job.err = errDuplicatePartition
			case !migrationAccepts(t, body.TransactionID):
				job.err = errMigrationNotCutOver(t)
			default:
				if job.err = checkMagic(rp.Records); job.err == nil && body.TransactionID == nil {
					job.err = checkNotTransactional(rp.Records)
				}
			}
			seen[key{rt.Topic, rp.Partition}] = true
		}
	}

	acks := replica.Acks(body.Acks)
	timeout := time.Duration(max(body.TimeoutMillis, 0)) * time.Millisecond
	var toAppend []*produceJob
	for _, j := range jobs {
		if j.err == nil {
			toAppend = append(toAppend, j)
		}
	}
	if body.TransactionID != nil && refuseAll == nil && s.cfg.TxnVerifier != nil &&
		(req.version >= tv2Produce || !s.cfg.TxnVerifyOnlyDisabled) {
		// Before the turn: the coordinator's answer for this request
		// overlaps the appends of the requests before it.
		s.verifyTxnBatches(ctx, req.version, *body.TransactionID, toAppend)
		toAppend = slices.DeleteFunc(toAppend, func(j *produceJob) bool { return j.err != nil })
	}
	// Appends in request order on this connection (see produceTurn),
	// then the waits for acks, concurrently across partitions and with
	// the connection's other requests.
	pending := make([]replica.Pending, len(toAppend))
	if h := s.testHookProduceTurn; h != nil {
		h(req.correlationID)
	}
	parked := time.Now()
	req.turn.wait()
	req.parked += time.Since(parked)
	for i, j := range toAppend {
		if j.verified {
			pending[i], j.err = s.replicas.StartAppendVerified(j.topic, j.partition, j.records, acks, j.guard)
		} else {
			pending[i], j.err = s.replicas.StartAppend(j.topic, j.partition, j.records, acks)
		}
		if j.err == nil {
			s.metrics.produced(j.topic, len(j.records), pending[i].Records())
		}
	}
	if req.conn != nil {
		req.conn.refused.settle(jobs)
	}
	req.turn.end()
	// Every batch is in the log or refused: nothing reads the records
	// again, so their frame goes back to the pool now (request.releaseFrame).
	for _, j := range jobs {
		j.records = nil
	}
	for i := range body.Topics {
		for k := range body.Topics[i].Partitions {
			body.Topics[i].Partitions[k].Records = nil
		}
	}
	req.releaseFrame()
	waitOne := func(i int) {
		if j := toAppend[i]; j.err == nil {
			j.result, j.err = pending[i].Wait(ctx, timeout)
		}
	}
	// The acks waits are parked time: request_percentage counts a
	// handler's work, not its waits (quota.go).
	parked = time.Now()
	if len(toAppend) == 1 {
		waitOne(0)
	} else if len(toAppend) > 1 {
		var wg sync.WaitGroup
		for i := range toAppend {
			wg.Add(1)
			go func() {
				defer wg.Done()
				waitOne(i)
			}()
		}
		wg.Wait()
	}
	req.parked += time.Since(parked)

	failed := false
	leaders := make(map[int32]bool)
	for _, j := range jobs {
		op := j.out
		if j.err == nil {
			op.BaseOffset = j.result.BaseOffset
			op.LogAppendTime = j.result.LogAppendTime
			op.LogStartOffset = j.result.LogStartOffset
			continue
		}
		failed = true
		op.ErrorCode = s.errorCodeLogged(j.err, "Produce", "topic", j.topic, "partition", j.partition)
		if req.version >= 8 && op.ErrorCode != kerr.UnknownServerError.Code {
			msg := clientMessage(j.err)
			op.ErrorMessage = &msg
		}
		if op.ErrorCode == kerr.NotLeaderForPartition.Code && req.version >= 10 {
			if t, ok := lookupTopic(s.image(), j.topic); ok {
				if p, ok := lookupPartition(t, j.partition); ok && p.Leader >= 0 {
					op.CurrentLeader.LeaderID = p.Leader
					op.CurrentLeader.LeaderEpoch = p.LeaderEpoch
					leaders[p.Leader] = true
				}
			}
		}
	}
	if len(leaders) > 0 {
		img := s.image()
		for id := range leaders {
			if b, ok := img.Broker(id); ok {
				rb := kmsg.NewProduceResponseBroker()
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

	if body.Acks == 0 {
		if failed {
			return nil, nil, errCloseConnection
		}
		return nil, nil, nil
	}
	return resp, nil, nil
}

// Produce refusals made at the protocol edge, each the Kafka error it is
// answered with.
var (
	errTransactionsUnsupported = fmtKerr(kerr.TransactionalIDAuthorizationFailed, "this node runs no transaction coordinator")
	errEmptyTransactionalID    = fmtKerr(kerr.TransactionalIDAuthorizationFailed, "empty transactional id")
	// The ACLs refuse the principal WRITE on the transactional id, or
	// on the topic (or CREATE on a topic it would auto-create).
	errTxnIDNotAuthorized = kerr.TransactionalIDAuthorizationFailed
	errTopicNotAuthorized = kerr.TopicAuthorizationFailed
	// Kafka answers it so too: no transactional id is authorized.
	errTransactionalBatchWithoutID = fmtKerr(kerr.TransactionalIDAuthorizationFailed, "a transactional batch in a request without a transactional id")
	errOldMessageFormat            = fmtKerr(kerr.UnsupportedForMessageFormat, "only record batch v2 (magic 2, produce v3+) is accepted")
	errDuplicatePartition          = fmtKerr(kerr.InvalidRequest, "partition appears more than once in the request")
	errTooShortForBatch            = fmtKerr(kerr.CorruptMessage, "records too short to be a record batch")
)

// kerrDetail is a Kafka error with a message for the client.
type kerrDetail struct {
	kerr *kerr.Error
	msg  string
}

// migrationAccepts is false for a produce to the destination of a
// topic migration that has not cut over (metadata.MigratingFromConfig)
// from anyone but the migration's copy: a record produced there now
// would precede source records still to be copied, and break their
// key's order. The check needs no lock against the cutover: it only
// ever opens the topic, and a produce refused a moment before it
// opens is retried.
func migrationAccepts(t *metadata.Topic, transactionalID *string) bool {
	src := t.Configs[metadata.MigratingFromConfig]
	return src == "" || transactionalID != nil && *transactionalID == metadata.MigrationTransactionalID(src)
}

// errMigrationNotCutOver answers such a produce once it has waited out
// the request's timeout (awaitMigrationCutover): REQUEST_TIMED_OUT,
// which clients retry after a backoff. Not a partition error that makes
// them refresh metadata first (LEADER_NOT_AVAILABLE, NOT_LEADER...):
// franz-go refreshes at most every 5 s (metadata.max.age's floor), so a
// producer moved here from the sealed source would wait that long.
func errMigrationNotCutOver(t *metadata.Topic) error {
	return fmtKerr(kerr.RequestTimedOut, fmt.Sprintf("topic %s is the destination of a migration from %s that has not cut over yet; it takes produces once it has",
		t.Name, t.Configs[metadata.MigratingFromConfig]))
}

// maxMigrationWait bounds how long a produce waits for its topic's
// migration to cut over, whatever its timeout_ms.
const maxMigrationWait = 30 * time.Second

// migrationPoll is how often a waiting produce looks at the image again.
const migrationPoll = 10 * time.Millisecond

// awaitMigrationCutover holds a produce to the destination of a
// migration that has not cut over until it has (this node's image
// opens the topic), the request's timeout passes, or ctx ends, and
// returns the image to go on with. Holding it, as Kafka holds an acks=all
// produce for its followers, makes a producer that moves from the sealed
// source wait out the drain (under a second) rather than a retry's
// backoff and metadata refresh.
func (s *Server) awaitMigrationCutover(ctx context.Context, img *metadata.Image, body *kmsg.ProduceRequest, denied map[string]bool) *metadata.Image {
	closed := func(img *metadata.Image) bool {
		for _, rt := range body.Topics {
			if denied[rt.Topic] {
				// Refused whatever its state: a wait would tell the
				// client the topic exists and is migrating.
				continue
			}
			if t, ok := lookupTopic(img, rt.Topic); ok && !migrationAccepts(t, body.TransactionID) {
				return true
			}
		}
		return false
	}
	if !closed(img) {
		return img
	}
	wait := min(time.Duration(max(body.TimeoutMillis, 0))*time.Millisecond, maxMigrationWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(migrationPoll)
	defer tick.Stop()
	for closed(img) {
		select {
		case <-ctx.Done():
			return img
		case <-deadline.C:
			return img
		case <-tick.C:
			img = s.image()
		}
	}
	return img
}

func fmtKerr(k *kerr.Error, msg string) error { return &kerrDetail{kerr: k, msg: msg} }
func (e *kerrDetail) Error() string           { return e.kerr.Message + ": " + e.msg }
func (e *kerrDetail) Unwrap() error           { return e.kerr }

// unknownProduceTopic is the error for a produce to a topic not in the
// image: the auto-create outcome if one was tried.
func unknownProduceTopic(name string, created map[string]autoCreated) error {
	if r, ok := created[name]; ok {
		if r.topic == nil {
			return kerr.ErrorForCode(r.code)
		}
		// Created, but the image we read after is older than the
		// create (cannot happen with a linearizable controller):
		// retriable.
		return kerr.LeaderNotAvailable
	}
	if metadata.ValidateTopicName(name) != nil {
		return kerr.InvalidTopicException
	}
	return replica.ErrUnknownTopicOrPartition
}

func partitionExists(t *metadata.Topic, p int32) bool {
	_, ok := lookupPartition(t, p)
	return ok
}

// checkMagic refuses data that is not record batch v2 before it reaches
// the append: message sets (magic 0 and 1) with
// UNSUPPORTED_FOR_MESSAGE_FORMAT. Other damage is left to the append's
// full validation, which answers CORRUPT_MESSAGE or INVALID_RECORD.
func checkMagic(records []byte) error {
	if len(records) <= magicOffset {
		return errTooShortForBatch
	}
	if m := records[magicOffset]; m == 0 || m == 1 {
		return errOldMessageFormat
	}
	return nil
}

// checkNotTransactional refuses records holding a transactional batch, in
// a request without a transactional id. Records it cannot parse pass, for
// the log to refuse with the reason.
func checkNotTransactional(records []byte) error {
	for len(records) > 0 {
		h, err := record.ParseHeader(records)
		if err != nil || h.Size() <= 0 || h.Size() > len(records) {
			return nil
		}
		if h.IsTransactional() {
			return errTransactionalBatchWithoutID
		}
		records = records[h.Size():]
	}
	return nil
}
