package httpapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/poison"
)

// Group consumption over HTTP:
//
//	GET  /v1/topics/{topic}/consume?group=G&max_bytes=M&timeout_ms=T&consumer=C&auto_offset_reset=R&isolation=I
//	POST /v1/topics/{topic}/commit  {"group": G, "offsets": {"17": 884214}, "consumer": C}
//	POST /v1/topics/{topic}/seek    {"group": G, "partition": P, "offset": N | "timestamp": T | "to": "earliest" | "latest", "consumer": C}
//	DELETE /v1/topics/{topic}/consume?group=G&consumer=C   closes the instance
//
// The first consume for (group, topic, consumer) starts a consumer
// instance on this node: a real member of the group (franz-go,
// cooperative-sticky), which shares the partitions with the group's other
// members, HTTP or Kafka. Without consumer, one default instance per
// group and topic. An instance unused for ConsumerIdleTimeout leaves the
// group.
//
// Instances are the caller's own: the principal that sent the request
// (auth.go) is part of an instance's key, so the same group, topic and
// consumer id (the default "" included) sent by two principals are two
// instances, two members of the group. Every request that uses an
// instance (consume, commit, ack, nack, seek, close) finds only its
// principal's: another principal's is as absent to it as one on another
// node (unknown_consumer, or the fallback a commit or seek takes when
// none runs here), so no one can drain, acknowledge, move or close an
// instance another principal started, or learn that it exists.
// Rejected: one table keyed without the principal, with the owner
// stored and checked; a principal would then collide with another's
// default instance and have to invent an id. A principal may run at most
// a quarter of MaxConsumers (at least one; perPrincipalMax), so that
// one cannot take the whole node's: past it a new instance is 429.
// User:ANONYMOUS is not capped: on a node that does not require
// credentials it is every unauthenticated client at once, and a cap on
// it would be a cap on the node. Delivery is at-least-once: the instance commits only what a
// commit request names (offsets are the next to read, Kafka's
// convention; a consume's next_offsets can be committed as they are), so
// records handed out and not committed come again after the instance
// expires or its partitions move.
//
// A group with no committed offset for a partition starts at its log
// end, as Kafka's consumers and `fjord consume --group` do by default
// (auto.offset.reset=latest), or at its log start with
// auto_offset_reset=earliest; the parameter counts when the consume
// starts the instance, and a running instance keeps what it started
// with. Until the group has given the instance its first assignment, a
// consume answers joining: true (and no records): an empty answer then
// does not mean there is nothing to read.
//
// isolation is Kafka's isolation.level, read_uncommitted (the default,
// as Kafka's consumers') or read_committed, which hands out only
// committed transactions' records and waits at a partition's last stable
// offset while a transaction there is open (read.go says more). Like
// auto_offset_reset it counts when the consume starts the instance: a
// franz-go client fetches at one level for its life. A consume that
// names the other level than its running instance's is 409
// isolation_mismatch and changes nothing (the instance keeps its
// records and position for the consumes that match), rather than quietly
// hand out records the client asked not to see, or withhold ones it
// asked for; one that names none reads at the instance's. A group's
// members may read at different levels, as Kafka's may: the level is
// the member's, not the group's.
//
// A consume answers {"records": [...], "next_offsets": {partition: next
// offset}, "gaps": [...], "joining": bool}.
//
// A position is always inside its partition's log, [log start, log end]:
// a commit or seek outside it is 416 offset_out_of_range, naming the
// range, and moves nothing. A position that falls outside later
// (retention or a records deletion passed it) is a gap, never reset by
// the gateway: the consume names it in "gaps", with the committed offset,
// the log's bounds and the records lost, delivers nothing from that
// partition and the other partitions' records as usual, until a seek of
// the partition moves it (consume_gap.go).

// Defaults for the consumer instances.
const (
	DefaultConsumerIdleTimeout = 5 * time.Minute
	// DefaultConsumerSessionTimeout is an instance's group session.
	// Shorter than franz-go's and Kafka's consumers' 45 s: an instance
	// dies only with its node (its heartbeats run on the node, whatever
	// its HTTP client does), and then its group should not wait most of
	// a minute to give its partitions to the members on the nodes that
	// live. fjord verify's http workload found the 45 s stall.
	DefaultConsumerSessionTimeout = 10 * time.Second
	DefaultMaxConsumers           = 100
	defaultConsumeWait            = time.Second
)

// instanceKey names an instance: the principal that started it and the
// group, topic and consumer id its requests name.
type instanceKey struct{ principal, group, topic, consumer string }

// instance is one HTTP consumer: a group member and the records it
// fetched but has not handed out yet (a consume's max_bytes can stop
// short of what one poll brought).
type instance struct {
	key instanceKey
	cl  *kgo.Client
	// isolation is the level cl fetches at, set when the instance
	// starts and never changed (so read without a lock).
	isolation isolation
	// ackMode is how the client acknowledges (ack.go), set when the
	// instance starts and never changed.
	ackMode ackMode

	mu       sync.Mutex // one request at a time
	pending  []*kgo.Record
	lastUsed time.Time
	// In ack_mode=records (ack.go, poison.go), under mu: the records
	// handed out and not committed past, by partition; how many (the
	// acknowledged ones among them included); the
	// generation they were handed out in; commits that failed, retried
	// with the next; and failed attempts by partition and offset.
	deliveries   map[int32]*delivery
	held         int
	deliveredGen int32
	toCommit     map[int32]int64
	attempts     map[int32]map[int64]int32
	// paused is the owned partitions stopped at a poison record
	// (poison.go), under mu.
	paused  map[int32]poison.Pause
	metrics *apiMetrics
	// closed is set, under mu, when the instance expires or is closed:
	// a request that found it just before must not use its client.
	closed bool

	// owned is the partitions the group gave this member, kept by its
	// callbacks (which run apart from requests, hence the lock of its
	// own; lock order: mu, then ownedMu).
	ownedMu sync.Mutex
	owned   map[int32]bool
	// positions and gaps are what the instance knows of its partitions
	// beyond franz-go (consume_gap.go): where it reads next, once it has
	// read or been seeked there, and which positions the broker said are
	// outside the log (with the gap's reason once described). setOwned
	// forgets a partition's when it comes or goes, since franz-go then
	// starts it anew at the committed offset.
	positions map[int32]int64
	gaps      map[int32]string
	// moved is the partitions that came or went since a request last
	// looked (takeMoved): their deliveries are forgotten then, under mu,
	// which the callbacks do not take.
	moved map[int32]bool
	// assigned is whether the group has given this member an assignment
	// (possibly empty: more members than partitions) since it started;
	// until then a consume answers joining: true.
	assigned bool
}

// joining is whether the member still waits for its first assignment.
func (in *instance) joining() bool {
	in.ownedMu.Lock()
	defer in.ownedMu.Unlock()
	return !in.assigned
}

func (in *instance) owns(p int32) bool {
	in.ownedMu.Lock()
	defer in.ownedMu.Unlock()
	return in.owned[p]
}

func (in *instance) setOwned(topics map[string][]int32, owned bool) {
	in.ownedMu.Lock()
	defer in.ownedMu.Unlock()
	// franz-go calls OnPartitionsAssigned at the end of every join, even
	// with nothing new to assign.
	in.assigned = in.assigned || owned
	for _, p := range topics[in.key.topic] {
		if owned {
			in.owned[p] = true
		} else {
			delete(in.owned, p)
		}
		delete(in.positions, p)
		delete(in.gaps, p)
		in.moved[p] = true
	}
}

// takeMoved returns the partitions that came or went since the last
// call.
func (in *instance) takeMoved() []int32 {
	in.ownedMu.Lock()
	defer in.ownedMu.Unlock()
	var out []int32
	for p := range in.moved {
		out = append(out, p)
	}
	clear(in.moved)
	return out
}

// consumers holds the node's instances.
type consumers struct {
	seed    []kgo.Opt // the node's listener and security (Config.seed)
	metrics *apiMetrics
	idle    time.Duration
	session time.Duration
	max     int

	mu   sync.Mutex
	m    map[instanceKey]*instance
	stop chan struct{}
	done chan struct{}
}

func newConsumers(seed []kgo.Opt, idle, session time.Duration, max int, metrics *apiMetrics) *consumers {
	c := &consumers{seed: seed, idle: idle, session: session, max: max, metrics: metrics, m: map[instanceKey]*instance{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.expire()
	return c
}

// instanceStart is what a consume asks of the instance it starts; a
// running instance keeps what it started with.
type instanceStart struct {
	// earliest: where the group has no committed offset, start at the
	// log start rather than the log end.
	earliest bool
	// isolation is the level to fetch at; isolationNamed, whether the
	// consume named it (then a running instance at the other level is a
	// conflict rather than used).
	isolation      isolation
	isolationNamed bool
	// ackMode is how the client acknowledges; ackModeNamed, whether the
	// consume named it (as isolation).
	ackMode      ackMode
	ackModeNamed bool
}

// get returns the instance for key, creating it (and so joining the
// group) as start says if needed; a full table is 429, a running
// instance at another isolation than start names 409.
func (c *consumers) get(key instanceKey, start instanceStart) (*instance, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in, ok := c.m[key]; ok {
		if start.isolationNamed && in.isolation != start.isolation {
			return nil, &apiError{status: http.StatusConflict, code: "isolation_mismatch",
				msg: fmt.Sprintf("the consumer instance of group %q on topic %q (consumer %q) on this node reads %s, not %s: consume without isolation to read at %s, "+
					"use another consumer id, or close the instance (DELETE) and consume again to start one at %s",
					key.group, key.topic, key.consumer, in.isolation, start.isolation, in.isolation, start.isolation)}
		}
		if start.ackModeNamed && in.ackMode != start.ackMode {
			return nil, &apiError{status: http.StatusConflict, code: "ack_mode_mismatch",
				msg: fmt.Sprintf("the consumer instance of group %q on topic %q (consumer %q) on this node acknowledges by %s, not %s: consume without ack_mode, "+
					"use another consumer id, or close the instance (DELETE) and consume again", key.group, key.topic, key.consumer, in.ackMode, start.ackMode)}
		}
		return in, nil
	}
	if len(c.m) >= c.max {
		return nil, &apiError{status: http.StatusTooManyRequests, code: "too_many_consumers",
			msg: fmt.Sprintf("this node runs %d consumer instances, its limit; let some expire or reuse them", c.max)}
	}
	if limit := perPrincipalMax(c.max); key.principal != anonymous && c.countLocked(key.principal) >= limit {
		return nil, &apiError{status: http.StatusTooManyRequests, code: "too_many_consumers",
			msg: fmt.Sprintf("%s runs %d consumer instances on this node, the limit per principal (a quarter of the node's %d); let some expire, close them, or reuse them",
				clip(key.principal, 256), limit, c.max)}
	}
	in := &instance{key: key, isolation: start.isolation, ackMode: start.ackMode, lastUsed: time.Now(), owned: map[int32]bool{},
		positions: map[int32]int64{}, gaps: map[int32]string{}, moved: map[int32]bool{},
		deliveries: map[int32]*delivery{}, deliveredGen: -1, toCommit: map[int32]int64{}, attempts: map[int32]map[int64]int32{},
		paused: map[int32]poison.Pause{}, metrics: c.metrics}
	cl, err := kgo.NewClient(append(slices.Clone(c.seed),
		kgo.ClientID("fjord-http-consumer"),
		kgo.ConsumerGroup(key.group),
		kgo.SessionTimeout(c.session),
		kgo.ConsumeTopics(key.topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		// A position outside the log (a commit that retention or
		// DeleteRecords has since passed) is an error for the client,
		// which the consume answers as a gap, not a reset: franz-go
		// would otherwise move the position by itself, to the log
		// start, or to ConsumeResetOffset when nothing was consumed
		// yet, silently skipping or replaying.
		kgo.ConsumeResetOffset(startOffset(start.earliest)),
		// The level, for the instance's life. KIP-447's other half,
		// RequireStable on the group's OffsetFetch (a member waits for
		// offsets that a transaction still open committed rather than
		// start from older ones), takes no option here: franz-go sets it
		// on every group consumer, and RequireStableFetchOffsets is a
		// deprecated no-op.
		kgo.FetchIsolationLevel(start.isolation.kgo()),
		kgo.MetadataMinAge(metadataMinAge),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, t map[string][]int32) { in.setOwned(t, true) }),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, t map[string][]int32) { in.setOwned(t, false) }),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, t map[string][]int32) { in.setOwned(t, false) }),
	)...)
	if err != nil {
		return nil, unavailable(err)
	}
	in.cl = cl
	c.m[key] = in
	return in, nil
}

// perPrincipalMax is how many instances one principal may run on a node
// that runs at most limit: a quarter, at least one.
func perPrincipalMax(limit int) int { return max(1, limit/4) }

// countLocked is the number of principal's instances.
// REQUIRES: c.mu held.
func (c *consumers) countLocked(principal string) int {
	n := 0
	for k := range c.m {
		if k.principal == principal {
			n++
		}
	}
	return n
}

// startOffset is where an instance starts reading a partition its group
// has no committed offset for, NoResetOffset all the same (see get).
func startOffset(earliest bool) kgo.Offset {
	if earliest {
		return kgo.NoResetOffset().AtStart()
	}
	return kgo.NoResetOffset().AtEnd()
}

// remove closes the instance for key, once the request it serves (if
// any) is done, and says whether there was one. Closing leaves the
// group.
func (c *consumers) remove(key instanceKey) bool {
	c.mu.Lock()
	in, ok := c.m[key]
	delete(c.m, key)
	c.mu.Unlock()
	if !ok {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.closed = true
	in.forgetPaused()
	in.cl.Close()
	return true
}

// lockLive returns the running instance for key with its mu held, or
// nil: none, or one closed meanwhile.
func (c *consumers) lockLive(key instanceKey) *instance {
	in := c.lookup(key)
	if in == nil {
		return nil
	}
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return nil
	}
	return in
}

// lookup returns a running instance, or nil.
func (c *consumers) lookup(key instanceKey) *instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

// expire closes instances idle past the timeout: leaving the group
// hands their partitions to the other members.
func (c *consumers) expire() {
	defer close(c.done)
	t := time.NewTicker(max(c.idle/4, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		var idle []*instance
		c.mu.Lock()
		for k, in := range c.m {
			if in.mu.TryLock() {
				if time.Since(in.lastUsed) > c.idle {
					in.closed = true
					in.forgetPaused()
					delete(c.m, k)
					idle = append(idle, in)
				}
				in.mu.Unlock()
			}
		}
		c.mu.Unlock()
		for _, in := range idle {
			in.cl.Close() // leaves the group
		}
	}
}

func (c *consumers) close() {
	close(c.stop)
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, in := range c.m {
		in.cl.Close()
		delete(c.m, k)
	}
}

type consumeResponse struct {
	Records     []readRecord     `json:"records"`
	NextOffsets map[string]int64 `json:"next_offsets"`
	// Gaps are the owned partitions whose position is outside the log
	// (consume_gap.go); never null.
	Gaps []consumeGap `json:"gaps"`
	// Joining is true while the instance waits for the group's first
	// assignment: no records yet does not mean none are there.
	Joining bool `json:"joining"`
	// Generation is the member's group generation: acks and nacks of
	// these records name it (ack.go).
	Generation int32 `json:"generation"`
	// In ack_mode=records: the records handed out and not acknowledged,
	// and whether their bound stopped this consume from handing out
	// more.
	Unacked      *int `json:"unacked,omitempty"`
	UnackedLimit bool `json:"unacked_limit,omitempty"`
	// Paused is the owned partitions stopped at a poison record
	// (ack_mode=records; poison.go).
	Paused []pausedJSON `json:"paused,omitempty"`
}

func (a *API) handleConsume(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	q := r.URL.Query()
	group := q.Get("group")
	if group == "" {
		writeError(w, badRequest("bad_group", "group is required: the consumer group to consume as"))
		return
	}
	if !a.allowed(w, r, consumerNeeds(group, topic)...) {
		return
	}
	maxBytes, err := queryInt(q.Get("max_bytes"), int64(a.cfg.MaxReadBytes), 1, int64(a.cfg.MaxReadBytes))
	if err != nil {
		writeError(w, badRequest("bad_max_bytes", "max_bytes %q: want 1 to %d", q.Get("max_bytes"), a.cfg.MaxReadBytes))
		return
	}
	waitMs, err := queryInt(q.Get("timeout_ms"), defaultConsumeWait.Milliseconds(), 0, maxReadWait.Milliseconds())
	if err != nil {
		writeError(w, badRequest("bad_timeout", "timeout_ms %q: want 0 to %d", q.Get("timeout_ms"), maxReadWait.Milliseconds()))
		return
	}
	var start instanceStart
	switch reset := q.Get("auto_offset_reset"); reset {
	case "", "latest":
	case "earliest":
		start.earliest = true
	default:
		writeError(w, badRequest("bad_auto_offset_reset", "auto_offset_reset %q: want earliest or latest (the default)", reset))
		return
	}
	if start.isolation, start.isolationNamed, err = parseIsolation(q.Get("isolation")); err != nil {
		writeError(w, err)
		return
	}
	if start.ackMode, start.ackModeNamed, err = parseAckMode(q.Get("ack_mode")); err != nil {
		writeError(w, err)
		return
	}
	if _, err := a.topicPartitions(r.Context(), topic); err != nil {
		writeError(w, err)
		return
	}
	in, err := a.consumers.get(instanceKey{principal: callerOf(r).principal, group: group, topic: topic, consumer: q.Get("consumer")}, start)
	if err != nil {
		writeError(w, err)
		return
	}
	in.mu.Lock()
	defer func() {
		in.lastUsed = time.Now()
		in.mu.Unlock()
	}()
	if in.closed { // expired or closed between get and here
		writeError(w, &apiError{status: http.StatusServiceUnavailable, code: "consumer_closed",
			msg: "the consumer instance was closed meanwhile (idle timeout, or a DELETE); consume again to start a new one"})
		return
	}
	in.applyMoves()
	// Records of partitions taken away since they were fetched are the
	// new owner's to hand out.
	kept := in.pending[:0]
	for _, rec := range in.pending {
		if in.owns(rec.Partition) {
			kept = append(kept, rec)
		}
	}
	in.pending = kept
	if len(in.pending) == 0 {
		ctx, cancel := context.WithTimeout(r.Context(), time.Duration(waitMs)*time.Millisecond)
		fetches := in.cl.PollFetches(ctx)
		cancel()
		var fetchErr error
		var outOfRange []int32
		fetches.EachError(func(_ string, p int32, err error) {
			switch {
			case isContextErr(err):
			case errors.Is(err, kerr.OffsetOutOfRange):
				outOfRange = append(outOfRange, p)
			case fetchErr == nil:
				fetchErr = err
			}
		})
		// Records wait in pending: those past max_bytes, or all of them
		// when this consume fails below, for the next consume.
		in.pending = in.notePoll(fetches.Records(), outOfRange)
		if fetchErr != nil && !kerr.IsRetriable(fetchErr) {
			writeError(w, fetchErr)
			return
		}
	}
	out := consumeResponse{Records: []readRecord{}, NextOffsets: map[string]int64{}, Gaps: []consumeGap{}}
	if gaps := in.gapsNow(); len(gaps) > 0 {
		// Described before anything is handed out, so that a failure
		// here leaves the records for the next consume.
		if out.Gaps, err = a.describeGaps(r.Context(), group, topic, gaps); err != nil {
			writeError(w, err)
			return
		}
		in.decided(out.Gaps)
	}
	limit := len(in.pending)
	if in.ackMode == ackRecords {
		// Partitions given or taken during the poll: what is handed
		// out below is tracked in the assignment as it is now.
		in.applyMoves()
		// Pauses first: a paused partition's records are dropped, not
		// handed out.
		paused, err := a.syncPauses(r, in)
		if err != nil {
			writeError(w, err)
			return
		}
		out.Paused = []pausedJSON{}
		for _, pz := range paused {
			out.Paused = append(out.Paused, pausedOf(pz, false))
		}
		limit = len(in.pending)
		out.Generation = in.syncGeneration()
		if room := maxHeld - in.held; room < limit {
			limit, out.UnackedLimit = max(room, 0), true
		}
	} else {
		out.Generation = in.generation()
	}
	var bytes int64
	n := 0
	for ; n < limit; n++ {
		rec := in.pending[n]
		size := int64(len(rec.Key) + len(rec.Value))
		if n > 0 && bytes+size > maxBytes {
			break // the first record goes whole whatever its size
		}
		bytes += size
		out.Records = append(out.Records, recordJSON(rec))
		out.NextOffsets[strconv.Itoa(int(rec.Partition))] = rec.Offset + 1
	}
	if in.ackMode == ackRecords {
		in.trackDelivered(in.pending[:n])
		unacked := in.unacked()
		out.Unacked = &unacked
	}
	in.pending = in.pending[n:]
	out.Joining = len(out.Records) == 0 && in.joining()
	writeJSON(w, http.StatusOK, out)
}

// DELETE /v1/topics/{topic}/consume?group=G&consumer=C closes the
// consumer instance that consumes with the same parameters on this node:
// it leaves its group at once, its partitions go to the other members,
// and a group with no other member is Empty (so its offsets can be
// reset or the group deleted) without waiting for the idle timeout.
// Records it had fetched and not handed out are dropped; what was not
// committed comes again to the next owner. Instances live on the node
// that started them, and are the caller's own: another node's, or
// another principal's, is unknown_consumer here.
func (a *API) handleCloseConsumer(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key := instanceKey{principal: callerOf(r).principal, group: q.Get("group"), topic: r.PathValue("topic"), consumer: q.Get("consumer")}
	if key.group == "" {
		writeError(w, badRequest("bad_group", "group is required: the group of the consumer instance to close"))
		return
	}
	// Closing is the member's LeaveGroup: what the member needs.
	if !a.allowed(w, r, consumerNeeds(key.group, key.topic)...) {
		return
	}
	if !a.consumers.remove(key) {
		writeError(w, &apiError{status: http.StatusNotFound, code: "unknown_consumer",
			msg: fmt.Sprintf("no consumer instance of group %q on topic %q with consumer %q runs on this node for this principal (it expired, was closed, runs on another node, or another principal started it)",
				key.group, key.topic, key.consumer)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"closed": map[string]string{"group": key.group, "topic": key.topic, "consumer": key.consumer}})
}

func isContextErr(err error) bool {
	return err == context.DeadlineExceeded || err == context.Canceled
}

func recordJSON(rec *kgo.Record) readRecord {
	rr := readRecord{Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp.UnixMilli()}
	rr.Key, rr.KeyB64 = keyJSON(rec.Key)
	if rec.Value != nil {
		v := base64.StdEncoding.EncodeToString(rec.Value)
		rr.Value = &v
	}
	rr.Headers, rr.HeaderList = headersJSON(rec.Headers)
	return rr
}

type commitRequest struct {
	Group    string           `json:"group"`
	Consumer string           `json:"consumer"`
	Offsets  map[string]int64 `json:"offsets"`
}

// POST /v1/topics/{topic}/commit commits through the caller's instance
// of the group on this node, as a member (so a rebalance that moved a partition
// refuses it), or, with none running here, as a simple commit, which
// the coordinator takes only while the group has no members (409).
func (a *API) handleCommit(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var req commitRequest
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Group == "" {
		writeError(w, badRequest("bad_group", "group is required"))
		return
	}
	if !a.allowed(w, r, consumerNeeds(req.Group, topic)...) {
		return
	}
	if len(req.Offsets) == 0 {
		writeError(w, badRequest("bad_offsets", `offsets is empty: give {"<partition>": <next offset>}`))
		return
	}
	td, err := a.topicPartitions(r.Context(), topic)
	if err != nil {
		writeError(w, err)
		return
	}
	offsets := map[int32]kgo.EpochOffset{}
	for ps, off := range req.Offsets {
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil || p < 0 || int(p) >= len(td.Partitions) {
			writeError(w, badRequest("bad_partition", "partition %q: topic %q has partitions 0 to %d", ps, topic, len(td.Partitions)-1))
			return
		}
		if off < 0 {
			writeError(w, badRequest("bad_offset", "partition %s: offset %d: want 0 or more", ps, off))
			return
		}
		offsets[int32(p)] = kgo.EpochOffset{Epoch: -1, Offset: off}
	}
	bounds, err := a.logBounds(r.Context(), topic)
	if err != nil {
		writeError(w, err)
		return
	}
	for p, eo := range offsets {
		if err := bounds.check(p, eo.Offset); err != nil {
			writeError(w, err)
			return
		}
	}
	if in := a.consumers.lockLive(instanceKey{principal: callerOf(r).principal, group: req.Group, topic: topic, consumer: req.Consumer}); in != nil {
		var commitErr error
		in.cl.CommitOffsetsSync(r.Context(), map[string]map[int32]kgo.EpochOffset{topic: offsets},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				commitErr = commitResponseError(resp, err)
			})
		in.lastUsed = time.Now()
		in.mu.Unlock()
		if commitErr != nil {
			writeError(w, commitError(commitErr))
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"committed": req.Offsets})
		return
	}
	os := kadm.Offsets{}
	for p, eo := range offsets {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: eo.Offset, LeaderEpoch: -1})
	}
	resp, err := a.adm.CommitOffsets(r.Context(), req.Group, os)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		writeError(w, commitError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"committed": req.Offsets})
}

// commitError maps a refused commit: a group that has moved on (a
// rebalance, or members elsewhere) is a conflict.
func commitError(err error) *apiError {
	for _, ke := range []*kerr.Error{kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress, kerr.FencedInstanceID} {
		if errors.Is(err, ke) {
			return &apiError{status: http.StatusConflict, code: "group_conflict",
				msg: "the group moved on (a rebalance, or members elsewhere own these partitions): " + err.Error()}
		}
	}
	return kafkaError(err)
}

// commitResponseError is the first error in a commit's answer.
func commitResponseError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

type seekRequest struct {
	Group     string `json:"group"`
	Consumer  string `json:"consumer"`
	Partition *int32 `json:"partition"`
	// One of Offset, Timestamp and To ("earliest": the log start;
	// "latest": the log end).
	Offset    *int64 `json:"offset"`
	Timestamp *int64 `json:"timestamp"`
	To        string `json:"to"`
}

// logBounds is where a topic's partitions' logs start and end, the
// range a group's position may take.
type logBounds struct {
	topic        string
	starts, ends kadm.ListedOffsets
}

// logBounds lists topic's log start and end offsets.
func (a *API) logBounds(ctx context.Context, topic string) (logBounds, error) {
	b := logBounds{topic: topic}
	var err error
	if b.starts, err = a.adm.ListStartOffsets(ctx, topic); err == nil {
		b.ends, err = a.adm.ListEndOffsets(ctx, topic)
	}
	if err != nil {
		return b, unavailable(err)
	}
	return b, nil
}

// of returns partition p's log start and end offsets.
func (b logBounds) of(p int32) (start, end int64, err error) {
	s, ok1 := b.starts.Lookup(b.topic, p)
	e, ok2 := b.ends.Lookup(b.topic, p)
	switch {
	case !ok1 || !ok2:
		return 0, 0, unavailable(fmt.Errorf("no log offsets listed for partition %d of topic %q", p, b.topic))
	case s.Err != nil:
		return 0, 0, kafkaError(s.Err)
	case e.Err != nil:
		return 0, 0, kafkaError(e.Err)
	}
	return s.Offset, e.Offset, nil
}

// check refuses an offset outside [log start, log end] of partition p:
// franz-go, fetching from there, would be told OFFSET_OUT_OF_RANGE and
// reset, which Kafka's convention puts at the log start, so a seek past
// the end replayed the whole partition. The log end itself is valid:
// the next record's offset.
func (b logBounds) check(p int32, offset int64) error {
	start, end, err := b.of(p)
	if err != nil {
		return err
	}
	if offset < start || offset > end {
		return outOfRange(b.topic, p, offset, start, end)
	}
	return nil
}

// outOfRange is the answer to an offset outside partition p's log.
func outOfRange(topic string, p int32, offset, start, end int64) *apiError {
	return &apiError{status: http.StatusRequestedRangeNotSatisfiable, code: "offset_out_of_range",
		msg: fmt.Sprintf("partition %d of topic %q: offset %d is outside the log, which is %d to %d (log start to log end, the next record's offset)",
			p, topic, offset, start, end)}
}

// POST /v1/topics/{topic}/seek moves where the group next reads a
// partition: the first offset at or after a timestamp (ListOffsets by
// time; the log end when no record is that new), the log start ("to":
// "earliest") or end ("latest"), or an offset. An instance on this node
// owning the partition moves at once (what it had fetched beyond is
// dropped) and a gap there ends; otherwise the position is committed,
// which the coordinator takes only while the group has no members: with
// the partition owned elsewhere it is 409. A request that does not name
// exactly one of offset, timestamp and to, or names a value they cannot
// take, is 400 and moves nothing.
func (a *API) handleSeek(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var req seekRequest
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	switch {
	case req.Group == "":
		writeError(w, badRequest("bad_group", "group is required"))
		return
	case req.Partition == nil:
		writeError(w, badRequest("bad_partition", "partition is required"))
		return
	case countTrue(req.Offset != nil, req.Timestamp != nil, req.To != "") != 1:
		writeError(w, badRequest("bad_seek", `give one of "offset", "timestamp" or "to" ("earliest" or "latest")`))
		return
	case req.To != "" && req.To != "earliest" && req.To != "latest":
		writeError(w, badRequest("bad_seek", `to %q: want "earliest" (the log start) or "latest" (the log end)`, req.To))
		return
	case req.Offset != nil && *req.Offset < 0:
		writeError(w, badRequest("bad_offset", "offset %d: want 0 or more", *req.Offset))
		return
	case req.Timestamp != nil && *req.Timestamp < 0:
		// Kafka's ListOffsets reads -1 and -2 as "latest" and
		// "earliest": a negative time would seek there unasked.
		writeError(w, badRequest("bad_timestamp", "timestamp %d: want Unix milliseconds, 0 or more", *req.Timestamp))
		return
	}
	// A seek is an OffsetCommit (or the member's own position).
	if !a.allowed(w, r, consumerNeeds(req.Group, topic)...) {
		return
	}
	td, err := a.topicPartitions(r.Context(), topic)
	if err != nil {
		writeError(w, err)
		return
	}
	p := *req.Partition
	if p < 0 || int(p) >= len(td.Partitions) {
		writeError(w, badRequest("bad_partition", "partition %d: topic %q has partitions 0 to %d", p, topic, len(td.Partitions)-1))
		return
	}
	var offset int64
	if req.Offset != nil {
		offset = *req.Offset
	} else if req.Timestamp != nil {
		listed, err := a.adm.ListOffsetsAfterMilli(r.Context(), *req.Timestamp, topic)
		if err != nil {
			writeError(w, unavailable(err))
			return
		}
		o, ok := listed.Lookup(topic, p)
		if !ok || o.Err != nil {
			writeError(w, unavailable(fmt.Errorf("listing offsets of %s/%d: %v", topic, p, o.Err)))
			return
		}
		offset = o.Offset
	}
	// Listed after the timestamp's offset, which is at most the log end
	// it saw, so a record appended between the two does not put it past
	// these bounds.
	bounds, err := a.logBounds(r.Context(), topic)
	if err != nil {
		writeError(w, err)
		return
	}
	if req.To != "" {
		start, end, err := bounds.of(p)
		if err != nil {
			writeError(w, err)
			return
		}
		offset = map[string]int64{"earliest": start, "latest": end}[req.To]
	}
	if err := bounds.check(p, offset); err != nil {
		writeError(w, err)
		return
	}
	if in := a.consumers.lockLive(instanceKey{principal: callerOf(r).principal, group: req.Group, topic: topic, consumer: req.Consumer}); in != nil {
		owned := in.owns(p)
		if owned {
			// Records handed out before the seek are not acknowledged
			// any more: what comes after the seek is what counts.
			in.forgetDeliveries(p)
			in.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{topic: {p: {Epoch: -1, Offset: offset}}})
			in.seeked(p, offset)
			kept := in.pending[:0]
			for _, rec := range in.pending {
				if rec.Partition != p {
					kept = append(kept, rec)
				}
			}
			in.pending = kept
		}
		in.lastUsed = time.Now()
		in.mu.Unlock()
		if owned {
			writeJSON(w, http.StatusOK, map[string]any{"partition": p, "offset": offset})
			return
		}
	}
	resp, err := a.adm.CommitOffsets(r.Context(), req.Group, kadm.Offsets{topic: {p: {Topic: topic, Partition: p, At: offset, LeaderEpoch: -1}}})
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		writeError(w, commitError(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"partition": p, "offset": offset})
}

// countTrue is how many of given are true.
func countTrue(given ...bool) int {
	n := 0
	for _, g := range given {
		if g {
			n++
		}
	}
	return n
}
