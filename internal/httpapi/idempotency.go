package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
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

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Idempotency keys: a produce retried with the same idempotency_key
// within the window returns the first one's partition and offset and
// appends nothing, also after the node restarts.
//
// The record carries its key in a header (idempotencyHeader), and the
// gateway keeps an index, key -> where the record went, in memory and in
// a compacted topic of its own (dedupTopic), which a starting gateway
// reads back. A produce writes a "pending" entry (the partition it is
// about to use) before the record and a "done" entry (its offset) after.
// A retry that finds only "pending" (the node died between the two)
// scans that partition from the pending entry's time for the header, so
// a record that did land is found rather than written twice. Records
// without a key or partition are placed by the idempotency key, with
// Kafka's hash, so a retry goes to the same partition. An idempotent
// produce needs acks=all: with less, where the record went is not known.
//
// Across gateways. Every node's gateway keeps its own index, and a client
// behind a load balancer retries on whichever node it reaches. So each
// gateway follows dedupTopic after its load (follow), applying what the
// others write, and before it decides a key is new, or pending, it
// catches up to the topic's end (sync): every entry written before the
// request arrived, by any gateway, is then in its index. A pending entry
// says until when its writer may still write the record (Until: the
// writer's produce runs under that deadline). Until then and a slack
// after it (for a request already on the wire when the deadline passed:
// takeoverSlack), another produce of the key is answered 409
// idempotency_key_in_progress with Retry-After, as the IETF draft
// answers a key whose first request is still being processed; after
// it, the partition is scanned for the record as after a crash, and only
// if it is not there is the record written again, under a pending entry
// of the new writer. (Found by fjord verify's http workload: a produce
// whose node died after the record landed, retried on another node, was
// written twice.) The bound assumes replica.lag.time.max.ms at its
// default or less. What it cannot cover is a produce request that lies
// unread in a stalled leader's socket longer than the slack and is then
// appended: a leader stalled that long has lost its lease and refuses
// it (DESIGN.md section 20).
//
// A key sent again with another record is not a retry: it is 422
// idempotency_key_reused, as the IETF's Idempotency-Key draft answers a
// key reused with a different payload (409 there means the first is
// still in progress, which here a retry waits out instead). Stripe's
// idempotency_error is the same rule. Each entry carries a digest of its
// record (recordDigest: topic, explicit partition, key, value, headers),
// so the rule holds after a restart; entries written before digests
// existed have none and answer any record with their key, as they did.
//
// A key is the producer's own: the index is keyed by topic, principal
// and idempotency key (dedupKey), so two principals that happen to send
// the same key, or one that guesses another's, neither see nor claim the
// other's entry (a 422 or a first result would tell that the key was
// used, and by what). The search after a lapsed pending entry matches
// the record's digest as well as its header, so it cannot take another
// principal's record with the same key for its own.

const (
	dedupTopic                     = metadata.HTTPIdempotencyTopic
	idempotencyHeader              = "fjord-idempotency-key"
	DefaultIdempotencyWindow       = time.Hour
	dedupLoadTimeout               = 30 * time.Second
	maxIdempotencyKeyBytes         = 256
	dedupStatePending              = "pending"
	dedupStateDone                 = "done"
	dedupPartitions          int32 = 1
	// pendingLease bounds how long a gateway may write the record of a
	// pending entry it wrote: its produce runs under that deadline.
	pendingLease = 10 * time.Second
	// takeoverSlack is how long after a pending entry's lease another
	// produce of its key still waits before it searches the partition.
	// The search reads up to the high watermark, so the slack must cover
	// a record its writer's leader appended and has not committed yet:
	// one appended before the deadline (a request on the wire, or
	// answered REQUEST_TIMED_OUT, which removes nothing) is committed or
	// cut within replica.lag.time.max.ms (30 s: the followers fetch it or
	// leave the ISR, or the leader is replaced) plus a failover.
	takeoverSlack = 40 * time.Second
	// syncTimeout bounds the wait for the index to catch up with
	// dedupTopic's end before a decision (503 past it).
	syncTimeout = 10 * time.Second
)

// dedupEntry is one key's record in the index and in dedupTopic.
type dedupEntry struct {
	State     string `json:"state"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp"`
	At        int64  `json:"at"` // when the entry was written, Unix ms
	// Digest is recordDigest of the record the key was first used for,
	// hex; "" in entries written before digests were kept.
	Digest string `json:"digest,omitempty"`
	// Until is, for a pending entry, the Unix ms after which its writer
	// writes the record no more (0 in entries from before leases: long
	// past). Gateway names the writer (its internal client id), for
	// whoever reads the topic.
	Until   int64  `json:"until,omitempty"`
	Gateway string `json:"gateway,omitempty"`
}

// recordDigest is SHA-256 of what makes a produce the same produce: the
// topic, the explicit partition if any, and the record's key, value and
// headers in order, each length-prefixed so that no two records share an
// encoding (a nil key or value is not an empty one). The idempotency
// key's own header is not in it: it is added after.
func recordDigest(topic string, explicit *int32, rec *kgo.Record) string {
	h := sha256.New()
	field := func(present bool, b []byte) {
		var n [9]byte
		if present {
			n[0] = 1
			binary.BigEndian.PutUint64(n[1:], uint64(len(b)))
		}
		h.Write(n[:])
		h.Write(b)
	}
	field(true, []byte(topic))
	var p [4]byte
	if explicit != nil {
		binary.BigEndian.PutUint32(p[:], uint32(*explicit))
	}
	field(explicit != nil, p[:])
	field(rec.Key != nil, rec.Key)
	field(rec.Value != nil, rec.Value)
	for _, hd := range rec.Headers {
		field(true, []byte(hd.Key))
		field(hd.Value != nil, hd.Value)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// dedupKey is idemKey's key in the index and in dedupTopic, for a
// produce to topic by principal:
//
//	topic 0x00 0xFF principal 0xFF idemKey
//
// A topic name has no 0x00, and a principal and an idempotency key are
// UTF-8 (JSON strings; Basic user names are checked; a bearer token's
// subject is JSON), in which 0xFF never appears: so the principal ends
// at the first 0xFF and no two (topic, principal, key) share a key.
// Entries written before principals were part of it are "topic 0x00
// idemKey", which never has 0xFF after the 0x00, so they match no new
// key: a retry, after an upgrade, of a produce answered before it is
// written again (once more). That is accepted: it can only happen
// within one idempotency window of the upgrade, and guessing the old
// entry's principal to keep it would let the first principal to retry
// claim another's key.
func dedupKey(topic, principal, idemKey string) string {
	return topic + "\x00\xff" + principal + "\xff" + idemKey
}

// keyInProgress is the answer to idemKey while a pending entry's writer
// may still write its record: try again after wait.
func keyInProgress(topic, idemKey string, wait time.Duration) *apiError {
	return &apiError{status: http.StatusConflict, code: "idempotency_key_in_progress", retryAfter: wait,
		msg: fmt.Sprintf("a produce with idempotency_key %q on topic %q is in progress, or ended without an answer, on this node or another: send it again after %v (Retry-After), and it is answered with the first one's result or written once",
			idemKey, topic, wait.Round(time.Second))}
}

// keyReused is the answer to idemKey sent again with another record.
func keyReused(topic, idemKey string) *apiError {
	return &apiError{status: http.StatusUnprocessableEntity, code: "idempotency_key_reused",
		msg: fmt.Sprintf("idempotency_key %q was used for another record on topic %q within the window: a retry must send the same record (key, value, headers, partition); a new record needs a new key", idemKey, topic)}
}

type dedup struct {
	seed   []kgo.Opt // the node's listener and security (Config.seed)
	window time.Duration
	now    func() time.Time
	writer *kgo.Client // acks=all, to dedupTopic
	reader *kgo.Client
	adm    *kadm.Client

	loaded  chan struct{}
	loadErr error
	// gateway is this gateway's name in the entries it writes.
	gateway string
	// follow is started by the first sync, once dedupTopic exists; ctx
	// ends it (the API's Close).
	followOnce sync.Once
	ctx        context.Context

	mu       sync.Mutex
	entries  map[string]dedupEntry
	inflight map[string]chan struct{}
	created  bool // dedupTopic exists
	// applied is the offset of dedupTopic up to which entries is
	// current (the next one to apply); progress is closed and replaced
	// whenever it grows.
	applied  int64
	progress chan struct{}
}

// ensureTopic creates dedupTopic if this gateway has not seen it yet.
func (d *dedup) ensureTopic(ctx context.Context) error {
	d.mu.Lock()
	created := d.created
	d.mu.Unlock()
	if created {
		return nil
	}
	retention := fmt.Sprint(d.window.Milliseconds())
	cleanup := "compact,delete"
	resp, err := d.adm.CreateTopic(ctx, dedupPartitions, -1, map[string]*string{"cleanup.policy": &cleanup, "retention.ms": &retention}, dedupTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s: %w", dedupTopic, err)
	}
	d.mu.Lock()
	d.created = true
	d.mu.Unlock()
	return nil
}

// keepWindow raises dedupTopic's retention.ms to the window when it is
// shorter: the topic was made with the window of the gateway that made it,
// and a node restarted with a longer window would otherwise have retention
// delete the entries that the longer window promises to remember. A
// retention longer than the window is left: it keeps entries the load
// then skips, which costs disk and loses nothing (and the controller
// refuses to shorten an internal topic's retention anyway).
func (d *dedup) keepWindow(ctx context.Context) error {
	rcs, err := d.adm.DescribeTopicConfigs(ctx, dedupTopic)
	if err != nil {
		return err
	}
	rc, err := rcs.On(dedupTopic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return fmt.Errorf("reading %s's retention.ms: %w", dedupTopic, err)
	}
	want := d.window.Milliseconds()
	for _, c := range rc.Configs {
		if c.Key != "retention.ms" {
			continue
		}
		if cur, err := strconv.ParseInt(c.MaybeValue(), 10, 64); err == nil && (cur < 0 || cur >= want) {
			return nil
		}
	}
	v := strconv.FormatInt(want, 10)
	resps, err := d.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &v}}, dedupTopic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resps.On(dedupTopic, nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		return fmt.Errorf("raising %s's retention.ms to the idempotency window (%d ms): %w", dedupTopic, want, err)
	}
	return nil
}

// newDedup makes the index's clients. The writer, and the admin client
// that creates dedupTopic, use clientID: dedupTopic is internal, which
// the node lets only that client id create or write (see
// kafkaserver.Config.InternalClientID).
func newDedup(seed []kgo.Opt, clientID string, window time.Duration, now func() time.Time, reader *kgo.Client) (*dedup, error) {
	if clientID == "" {
		clientID = "fjord-http" // refused: see Config.InternalClientID
	}
	writer, err := kgo.NewClient(append(slices.Clone(seed), kgo.ClientID(clientID), kgo.DefaultProduceTopic(dedupTopic),
		kgo.ProducerLinger(0), kgo.MetadataMinAge(metadataMinAge))...)
	if err != nil {
		return nil, err
	}
	d := &dedup{seed: seed, window: window, now: now, writer: writer, reader: reader, adm: kadm.NewClient(writer), loaded: make(chan struct{}),
		gateway: clientID, ctx: context.Background(),
		entries: map[string]dedupEntry{}, inflight: map[string]chan struct{}{}, progress: make(chan struct{})}
	return d, nil
}

// load reads dedupTopic back, when there is one; until it has,
// idempotent produces wait (and answer 503 past dedupLoadTimeout). ctx
// also bounds the following that comes after.
func (d *dedup) load(ctx context.Context) {
	d.ctx = ctx // before loaded is closed, so every sync sees it
	defer close(d.loaded)
	for {
		lctx, cancel := context.WithTimeout(ctx, dedupLoadTimeout)
		err := d.loadTopic(lctx)
		cancel()
		if err == nil || ctx.Err() != nil {
			d.loadErr = err
			return
		}
		// The controller may not have a leader yet; try again.
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			d.loadErr = ctx.Err()
			return
		}
	}
}

func (d *dedup) loadTopic(ctx context.Context) error {
	// The index topic is created by the first idempotent produce (see
	// ensureTopic): a cluster whose clients never send an idempotency
	// key has no topic it did not ask for.
	topics, err := d.adm.ListTopicsWithInternal(ctx, dedupTopic)
	if err != nil {
		return err
	}
	if td, ok := topics[dedupTopic]; !ok || td.Err != nil {
		return nil
	}
	d.mu.Lock()
	d.created = true
	d.mu.Unlock()
	if err := d.keepWindow(ctx); err != nil {
		return err
	}
	ends, err := d.adm.ListEndOffsets(ctx, dedupTopic)
	if err != nil {
		return err
	}
	end, _ := ends.Lookup(dedupTopic, 0)
	if end.Err != nil {
		return end.Err
	}
	if end.Offset == 0 {
		return nil
	}
	cl, err := kgo.NewClient(append(slices.Clone(d.seed),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{dedupTopic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	cutoff := d.now().Add(-d.window).UnixMilli()
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		if last := d.apply(fs, cutoff); last+1 >= end.Offset {
			d.advance(end.Offset)
			return nil
		}
	}
}

// apply puts the entries fs brought in the index (applyLocked) and
// returns the last one's offset, -1 for none.
func (d *dedup) apply(fs kgo.Fetches, cutoff int64) int64 {
	var last int64 = -1
	d.mu.Lock()
	defer d.mu.Unlock()
	fs.EachRecord(func(r *kgo.Record) {
		last = r.Offset
		d.applyLocked(r, cutoff)
	})
	return last
}

// applyLocked puts an entry read from dedupTopic in the index (a
// tombstone removes the key), unless it is older than the window or than
// the entry the index has: this gateway's own writes go to the index
// before the follower reads them back. REQUIRES: d.mu held.
func (d *dedup) applyLocked(r *kgo.Record, cutoff int64) {
	if r.Value == nil {
		delete(d.entries, string(r.Key))
		return
	}
	var e dedupEntry
	if json.Unmarshal(r.Value, &e) != nil || e.At < cutoff {
		return
	}
	if cur, ok := d.entries[string(r.Key)]; ok && cur.At > e.At {
		return
	}
	d.entries[string(r.Key)] = e
}

// advance marks the index current up to offset of dedupTopic.
func (d *dedup) advance(offset int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if offset > d.applied {
		d.applied = offset
		close(d.progress)
		d.progress = make(chan struct{})
	}
}

// follow applies what is written to dedupTopic after the load, by any
// gateway, until ctx ends. Fetch errors (a leader moving) are retried by
// the client; sync notices a follower that does not keep up.
func (d *dedup) follow(ctx context.Context) {
	d.mu.Lock()
	from := d.applied
	d.mu.Unlock()
	cl, err := kgo.NewClient(append(slices.Clone(d.seed), kgo.MetadataMinAge(metadataMinAge),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{dedupTopic: {0: kgo.NewOffset().At(from)}}))...)
	if err != nil {
		return // every sync then times out: 503, never a wrong answer
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		if last := d.apply(fs, d.now().Add(-d.window).UnixMilli()); last >= 0 {
			d.advance(last + 1)
		}
	}
}

// sync returns once the index holds every entry dedupTopic had when it
// was called, whichever gateway wrote it; an error (503) if the index
// cannot catch up within syncTimeout.
func (d *dedup) sync(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	var end int64
	for {
		var err error
		if end, err = d.endOffset(ctx); err == nil {
			break
		}
		// A topic created a moment ago (ensureTopic) is not known to
		// every broker yet; a leader may be moving.
		if !kerr.IsRetriable(err) || !clock.Sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("finding the end of %s: %w", dedupTopic, err)
		}
	}
	d.followOnce.Do(func() { go d.follow(d.ctx) })
	for {
		d.mu.Lock()
		applied, progress := d.applied, d.progress
		d.mu.Unlock()
		if applied >= end {
			return nil
		}
		select {
		case <-progress: // more applied: look again
		case <-ctx.Done():
			return fmt.Errorf("the idempotency index is at offset %d of %s, behind its end %d: %w", applied, dedupTopic, end, ctx.Err())
		}
	}
}

// endOffset asks dedupTopic's leader for its high watermark. One
// ListOffsets, which the client sends to the leader it knows: kadm's
// ListEndOffsets asks for the topic's metadata first, a second round
// trip on every idempotent produce.
func (d *dedup) endOffset(ctx context.Context) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = dedupTopic
	p := kmsg.NewListOffsetsRequestTopicPartition()
	p.Partition, p.Timestamp = 0, -1 // latest: the high watermark
	t.Partitions = append(t.Partitions, p)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, d.writer)
	if err != nil {
		return 0, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return 0, fmt.Errorf("ListOffsets for %s answered %d topics", dedupTopic, len(resp.Topics))
	}
	rp := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
		return 0, err
	}
	return rp.Offset, nil
}

// acquire makes key's produces take turns: a retry racing its original
// waits for it, then finds its entry.
func (d *dedup) acquire(ctx context.Context, key string) error {
	for {
		d.mu.Lock()
		wait, busy := d.inflight[key]
		if !busy {
			d.inflight[key] = make(chan struct{})
			d.mu.Unlock()
			return nil
		}
		d.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (d *dedup) release(key string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	close(d.inflight[key])
	delete(d.inflight, key)
}

func (d *dedup) lookup(key string) (dedupEntry, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.entries[key]
	if ok && time.UnixMilli(e.At).Before(d.now().Add(-d.window)) {
		delete(d.entries, key)
		return dedupEntry{}, false
	}
	return e, ok
}

// put writes key's entry to dedupTopic and the index.
func (d *dedup) put(ctx context.Context, key string, e dedupEntry) error {
	e.At = d.now().UnixMilli()
	v, _ := json.Marshal(e)
	if err := d.writer.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: v}).FirstErr(); err != nil {
		return err
	}
	d.mu.Lock()
	d.entries[key] = e
	d.mu.Unlock()
	return nil
}

// produceIdempotent produces rec (to topic, which has n partitions)
// once for idemKey within the window.
func (a *API) produceIdempotent(ctx context.Context, cl *kgo.Client, topic string, n int, rec *kgo.Record, idemKey string, explicit *int32) (produceResult, error) {
	d := a.dedup
	wait := time.NewTimer(dedupLoadTimeout)
	defer wait.Stop()
	select {
	case <-d.loaded:
	case <-wait.C:
		return produceResult{}, unavailable(errors.New("the idempotency index is still loading; try again"))
	case <-ctx.Done():
		return produceResult{}, ctx.Err()
	}
	if d.loadErr != nil {
		return produceResult{}, unavailable(fmt.Errorf("idempotency keys are unavailable: %w", d.loadErr))
	}
	key := dedupKey(topic, principalOf(ctx), idemKey)
	digest := recordDigest(topic, explicit, rec)
	if err := d.acquire(ctx, key); err != nil {
		return produceResult{}, err
	}
	defer d.release(key)

	// A done entry is final; anything else is decided on an index that
	// holds every gateway's entries, which the topic exists for only
	// once some gateway made it.
	e, ok := d.lookup(key)
	if !ok || e.State != dedupStateDone {
		if err := d.ensureTopic(ctx); err != nil {
			return produceResult{}, unavailable(err)
		}
		if err := d.sync(ctx); err != nil {
			return produceResult{}, unavailable(err)
		}
		e, ok = d.lookup(key)
	}
	if ok {
		if e.Digest != "" && e.Digest != digest {
			return produceResult{}, keyReused(topic, idemKey)
		}
		if e.State == dedupStateDone {
			return produceResult{Partition: e.Partition, Offset: e.Offset, Timestamp: e.Timestamp}, nil
		}
		// Pending: its writer may still write the record until its
		// lease and slack have passed.
		if wait := time.UnixMilli(e.Until).Add(takeoverSlack).Sub(d.now()); wait > 0 {
			return produceResult{}, keyInProgress(topic, idemKey, wait)
		}
		// Past them: the record may have landed before its writer died.
		if res, found, err := a.findByHeader(ctx, topic, e.Partition, e.At, idemKey, explicit, e.Digest); err != nil {
			return produceResult{}, unavailable(err)
		} else if found {
			_ = d.put(ctx, key, dedupEntry{State: dedupStateDone, Partition: res.Partition, Offset: res.Offset, Timestamp: res.Timestamp, Digest: e.Digest})
			return res, nil
		}
	}

	// Where the record goes is decided now, so the pending entry can
	// name it: the request's partition, else Kafka's hash of the record
	// key, else of the idempotency key.
	p := int32(0)
	switch {
	case explicit != nil:
		p = *explicit
	default:
		hashKey := rec.Key
		if hashKey == nil {
			hashKey = []byte(idemKey)
		}
		p = int32(kgo.StickyKeyPartitioner(nil).ForTopic(topic).Partition(&kgo.Record{Key: hashKey}, n))
	}
	withPartition(rec, p)
	if err := awaitPartitions(ctx, cl, topic, p+1); err != nil {
		return produceResult{}, unavailable(err)
	}
	rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: idempotencyHeader, Value: []byte(idemKey)})
	until := d.now().Add(pendingLease)
	if err := d.put(ctx, key, dedupEntry{State: dedupStatePending, Partition: p, Digest: digest, Until: until.UnixMilli(), Gateway: d.gateway}); err != nil {
		return produceResult{}, unavailable(err)
	}
	// The lease: past it, another gateway may take the key over, so the
	// record must not be written after it. (The deadline is the
	// process's clock, the entry's d.now's; they differ only in tests.)
	pctx, cancel := context.WithTimeout(ctx, pendingLease)
	r, err := cl.ProduceSync(pctx, rec).First()
	cancel()
	if err != nil {
		return produceResult{}, err
	}
	res := resultOf(r, "all")
	// Best effort: were it lost, a retry's scan finds the record.
	_ = d.put(ctx, key, dedupEntry{State: dedupStateDone, Partition: res.Partition, Offset: res.Offset, Timestamp: res.Timestamp, Digest: digest})
	return res, nil
}

// findByHeader looks through partition p of topic, from the time a
// pending entry was written, for the record carrying idemKey and, when
// digest is given (the pending entry's; "" in entries from before
// digests), whose recordDigest is digest: the header alone could be
// another principal's record under the same key (dedupKey).
func (a *API) findByHeader(ctx context.Context, topic string, p int32, fromMs int64, idemKey string, explicit *int32, digest string) (produceResult, bool, error) {
	listed, err := a.adm.ListOffsetsAfterMilli(ctx, fromMs-1000, topic)
	if err != nil {
		return produceResult{}, false, err
	}
	start, _ := listed.Lookup(topic, p)
	if start.Err != nil {
		return produceResult{}, false, start.Err
	}
	cl, err := kgo.NewClient(append(a.cfg.seed(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(start.Offset)}}))...)
	if err != nil {
		return produceResult{}, false, err
	}
	defer cl.Close()
	ends, err := a.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return produceResult{}, false, err
	}
	end, _ := ends.Lookup(topic, p)
	next := start.Offset
	for next < end.Offset {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return produceResult{}, false, err
		}
		var found *kgo.Record
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if found == nil && carriesKey(r, idemKey) && (digest == "" || writtenDigest(topic, explicit, r) == digest) {
				found = r
			}
		})
		if found != nil {
			return produceResult{Partition: found.Partition, Offset: found.Offset, Timestamp: found.Timestamp.UnixMilli()}, true, nil
		}
	}
	return produceResult{}, false, nil
}

// carriesKey reports whether r carries the idempotency header of
// idemKey, the one the gateway adds after the client's (the last).
func carriesKey(r *kgo.Record, idemKey string) bool {
	n := len(r.Headers)
	return n > 0 && r.Headers[n-1].Key == idempotencyHeader && string(r.Headers[n-1].Value) == idemKey
}

// writtenDigest is recordDigest of a record the gateway wrote, as it was
// computed before the idempotency header was added: without that header
// (the last), with the produce's explicit partition.
func writtenDigest(topic string, explicit *int32, r *kgo.Record) string {
	c := *r
	c.Headers = r.Headers[:len(r.Headers)-1]
	return recordDigest(topic, explicit, &c)
}
