package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/timeline"
)

// The http workload: the queue workload over Fjord's HTTP/JSON API
// (DESIGN.md section 16) instead of the Kafka protocol, as a client that
// only has HTTP uses it. Its parts:
//
//   - producers: --producers of them, each one produce at a time, every
//     record with an idempotency key of its own (seed, producer,
//     counter); a produce that fails in a way that may have written it
//     (no answer, a 5xx, a 429) is sent again, the same body and key, to
//     the next node in turn, as a client behind a load balancer retries.
//     The key must make that retry write nothing twice, whichever node it
//     reaches;
//   - a reader: the stateless records route, every partition from its
//     start, what it is served told to the checker (unstable reads);
//   - a group: --group-members consumer instances (each a consume
//     long-poll on one node, then a commit of what it processed). Now and
//     then one does not process what it got and seeks back to its first
//     offset instead, as an application whose processing failed replays;
//     the records come again. A member whose node stops answering moves
//     to the next node (a new instance there; the old one died with its
//     node). The gateway's instances are members the client cannot see
//     into, so the group's ownership is not checked, only its commits
//     (never backwards, never past what was processed, nothing skipped)
//     and that it catches up once the writes stop.
//
// The log is read back and checked with the Kafka protocol, as for every
// workload.

const (
	// httpRetryFor bounds how long a producer keeps retrying one record
	// before counting it failed (it may still have been written: not
	// acknowledged is allowed to be there, once). Longer than a
	// gateway's hold on a key whose first produce has no known outcome
	// (409 idempotency_key_in_progress, about 50 s).
	httpRetryFor = 2 * time.Minute
	// httpPollMs is a consume's and a read's long-poll.
	httpPollMs = 500
	// httpSeekEvery is the odds (1 in) that a member replays a consume's
	// records instead of processing them.
	httpSeekEvery = 20
	// httpBackoff is the pause after a failed request, before the next
	// node is tried.
	httpBackoff = 100 * time.Millisecond
)

// httpNodes are the HTTP API's base URLs and the client that calls them.
type httpNodes struct {
	bases []string // "http://host:port"
	hc    *http.Client
}

func newHTTPNodes(addrs []string) *httpNodes {
	n := &httpNodes{hc: &http.Client{Timeout: requestTimeout}}
	for _, a := range addrs {
		n.bases = append(n.bases, "http://"+a)
	}
	return n
}

// httpStatusError is an answer other than 200: its status and the API's
// JSON error code and message.
type httpStatusError struct {
	status  int
	code    string
	message string
	// retryAfter is the Retry-After header's wait, 0 without one.
	retryAfter time.Duration
}

func (e *httpStatusError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.status, e.code, truncate(e.message, 200))
}

// retriable reports whether err leaves a request's outcome unknown or
// worth another try: no answer, a 5xx, a 429, a 408, or a 409 saying an
// idempotency key's first produce may still be written. Any other 4xx
// is the request's own fault and would be answered the same again.
func retriable(err error) bool {
	var se *httpStatusError
	if !errors.As(err, &se) {
		return true
	}
	return se.status >= 500 || se.status == http.StatusTooManyRequests || se.status == http.StatusRequestTimeout ||
		se.status == http.StatusConflict && se.code == "idempotency_key_in_progress"
}

// retryWait is how long to wait before sending a request that failed
// with err again: its Retry-After, or httpBackoff.
func retryWait(err error) time.Duration {
	var se *httpStatusError
	if errors.As(err, &se) && se.retryAfter > 0 {
		return se.retryAfter
	}
	return httpBackoff
}

// call sends method path (with body, JSON, when not nil) to node and
// decodes a 200's JSON answer into out.
func (n *httpNodes) call(ctx context.Context, node int, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, n.bases[node%len(n.bases)]+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Code    string `json:"error"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &e) != nil || e.Code == "" {
			e.Message = string(data) // not the API's error: a proxy's, say
		}
		se := &httpStatusError{status: resp.StatusCode, code: e.Code, message: e.Message}
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			se.retryAfter = time.Duration(secs) * time.Second
		}
		return se
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// httpRecord is a record as the API hands it out.
type httpRecord struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	KeyB64    *string `json:"key_b64"`
	Value     *string `json:"value"`
}

func (r httpRecord) decode(topic string) (history.Record, error) {
	out := history.Record{Topic: topic, Partition: r.Partition, Offset: r.Offset}
	var err error
	if r.KeyB64 != nil {
		if out.Key, err = base64.StdEncoding.DecodeString(*r.KeyB64); err != nil {
			return out, fmt.Errorf("%s-%d offset %d: key_b64: %w", topic, r.Partition, r.Offset, err)
		}
	}
	if r.Value != nil {
		if out.Value, err = base64.StdEncoding.DecodeString(*r.Value); err != nil {
			return out, fmt.Errorf("%s-%d offset %d: value: %w", topic, r.Partition, r.Offset, err)
		}
	}
	return out, nil
}

// verifyHTTPWriters are the http workload's producers.
type verifyHTTPWriters struct {
	nodes   *httpNodes
	checker *history.Checker
	v       verifyOptions
	writeCounts
}

func (w *verifyHTTPWriters) run(ctx context.Context, progress io.Writer, stop time.Time) error {
	runProducers(ctx, progress, stop, w.v, w.counts, w.checker, w.produce)
	return nil
}

// produce is producer i's loop: one record at a time, at its share of
// the rate, each retried (same body, same key) on the next node until it
// is answered or httpRetryFor passes. A record in flight when the run's
// time is up is still seen through.
func (w *verifyHTTPWriters) produce(ctx context.Context, rng *rand.Rand, i int) {
	producer := fmt.Sprintf("p%d", i)
	node := i
	pace := newPacer(w.v.rate, w.v.producers)
	for seq := 0; pace.wait(ctx); seq++ {
		topic, key, value := workloadRecord(rng, w.v, i, seq)
		w.checker.SentBy(producer, topic, key, value)
		w.addSent()
		body := map[string]any{
			"key":             string(key),
			"value":           base64.StdEncoding.EncodeToString(value),
			"idempotency_key": fmt.Sprintf("%d-%s-%d", w.v.seed, producer, seq),
		}
		var res struct {
			Partition int32 `json:"partition"`
			Offset    int64 `json:"offset"`
		}
		path := "/v1/topics/" + url.PathEscape(topic) + "/produce"
		deadline := time.Now().Add(httpRetryFor)
		var err error
		for {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
			err = w.nodes.call(rctx, node, http.MethodPost, path, body, &res)
			cancel()
			if err == nil || !retriable(err) || time.Now().After(deadline) {
				break
			}
			node++ // another node, as a load balancer would pick
			time.Sleep(min(retryWait(err), time.Until(deadline)+time.Millisecond))
		}
		if err != nil {
			w.addFailed(value, err)
			continue
		}
		w.checker.Acked(history.Record{Topic: topic, Partition: res.Partition, Offset: res.Offset, Key: key, Value: value})
	}
}

// verifyHTTPReader reads every partition from its start with the
// stateless records route, telling the checker what it is served.
type verifyHTTPReader struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   errorCount
}

func startVerifyHTTPReader(ctx context.Context, nodes *httpNodes, v verifyOptions, checker *history.Checker, tl *timeline.Timeline) *verifyHTTPReader {
	rctx, cancel := context.WithCancel(ctx)
	r := &verifyHTTPReader{cancel: cancel, errs: errorCount{tl: tl, series: "reader"}}
	for i, topic := range v.topics {
		for p := range v.partitions {
			r.wg.Go(func() { r.read(rctx, nodes, checker, topic, p, i+int(p)) })
		}
	}
	return r
}

// read polls one partition from its start, on node (the next one after
// a failure), until ctx ends.
func (r *verifyHTTPReader) read(ctx context.Context, nodes *httpNodes, checker *history.Checker, topic string, p int32, node int) {
	next := int64(0)
	path := fmt.Sprintf("/v1/topics/%s/partitions/%d/records", url.PathEscape(topic), p)
	for ctx.Err() == nil {
		var res struct {
			Records    []httpRecord `json:"records"`
			NextOffset int64        `json:"next_offset"`
		}
		err := nodes.call(ctx, node, http.MethodGet, fmt.Sprintf("%s?offset=%d&timeout_ms=%d", path, next, httpPollMs), nil, &res)
		if err != nil {
			if ctx.Err() == nil {
				r.errs.add(fmt.Sprintf("%s-%d: %v", topic, p, err))
				node++
				clock.Sleep(ctx, httpBackoff)
			}
			continue
		}
		for _, hr := range res.Records {
			rec, err := hr.decode(topic)
			if err != nil {
				r.errs.add(err.Error())
				continue
			}
			checker.Read(rec)
		}
		if res.NextOffset > next {
			next = res.NextOffset
		}
	}
}
func (r *verifyHTTPReader) stop() (int, string) {
	r.cancel()
	r.wg.Wait()
	return r.errs.get()
}

// verifyHTTPGroup is the http workload's group: members consuming
// through the HTTP API. An instance consumes one topic, so each topic has
// --group-members of its own.
type verifyHTTPGroup struct {
	name    string
	nodes   *httpNodes
	checker *history.Checker
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	errs    errorCount

	mu      sync.Mutex
	members map[string]httpMember // by name
}

// httpMember is where a member's instance is: its topic, and the node.
type httpMember struct {
	topic string
	node  int
}

func startVerifyHTTPGroup(ctx context.Context, nodes *httpNodes, v verifyOptions, checker *history.Checker, tl *timeline.Timeline) *verifyHTTPGroup {
	gctx, cancel := context.WithCancel(ctx)
	g := &verifyHTTPGroup{name: v.topic, nodes: nodes, checker: checker, cancel: cancel, members: map[string]httpMember{},
		errs: errorCount{tl: tl, series: "group"}}
	for j, topic := range v.topics {
		for i := range v.groupMembers {
			n := j*v.groupMembers + i
			name := fmt.Sprintf("m%d", n)
			rng := rand.New(rand.NewPCG(v.seed, 0x5eec+uint64(n)))
			g.wg.Go(func() { g.consume(gctx, name, topic, n, rng) })
		}
	}
	return g
}

// consume is one member's loop: consume, then process and commit, or,
// one time in httpSeekEvery, seek back and get the same records again.
func (g *verifyHTTPGroup) consume(ctx context.Context, name, topic string, node int, rng *rand.Rand) {
	q := url.Values{"group": {g.name}, "consumer": {name}, "auto_offset_reset": {"earliest"}, "timeout_ms": {strconv.Itoa(httpPollMs)}}
	consumePath := "/v1/topics/" + url.PathEscape(topic) + "/consume?" + q.Encode()
	topicPath := "/v1/topics/" + url.PathEscape(topic)
	g.setNode(name, topic, node)
	for ctx.Err() == nil {
		var res struct {
			Records     []httpRecord     `json:"records"`
			NextOffsets map[string]int64 `json:"next_offsets"`
		}
		if err := g.nodes.call(ctx, node, http.MethodGet, consumePath, nil, &res); err != nil {
			if ctx.Err() == nil {
				g.errs.add(fmt.Sprintf("%s: consume: %v", name, err))
				if retriable(err) {
					node++ // its node is down: an instance on the next one
					g.setNode(name, topic, node)
				}
				clock.Sleep(ctx, httpBackoff)
			}
			continue
		}
		if len(res.Records) == 0 {
			continue
		}
		replayed := int32(-1) // the partition sought back, if any
		if rng.IntN(httpSeekEvery) == 0 {
			// Processing failed: back to the first record of a partition
			// it was given, which comes again. A seek that fails leaves
			// the position past the records, so they are processed after
			// all: skipping them would be this member's doing.
			first := res.Records[0]
			body := map[string]any{"group": g.name, "consumer": name, "partition": first.Partition, "offset": first.Offset}
			if err := g.nodes.call(ctx, node, http.MethodPost, topicPath+"/seek", body, nil); err != nil {
				if ctx.Err() == nil {
					g.errs.add(fmt.Sprintf("%s: seek: %v", name, err))
				}
			} else {
				replayed = first.Partition
				delete(res.NextOffsets, strconv.Itoa(int(first.Partition)))
			}
		}
		for _, hr := range res.Records {
			if hr.Partition != replayed {
				g.process(hr, topic, name)
			}
		}
		if len(res.NextOffsets) == 0 {
			continue
		}
		body := map[string]any{"group": g.name, "consumer": name, "offsets": res.NextOffsets}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
		err := g.nodes.call(cctx, node, http.MethodPost, topicPath+"/commit", body, nil)
		cancel()
		if err != nil {
			g.errs.add(fmt.Sprintf("%s: commit: %v", name, err)) // a 409 after a rebalance, or a node gone
			continue
		}
		for ps, off := range res.NextOffsets {
			p, _ := strconv.ParseInt(ps, 10, 32)
			g.checker.Committed(g.name, name, history.TopicPartition{Topic: topic, Partition: int32(p)}, off)
		}
	}
}

func (g *verifyHTTPGroup) process(hr httpRecord, topic, member string) {
	rec, err := hr.decode(topic)
	if err != nil {
		g.errs.add(err.Error())
		return
	}
	g.checker.Processed(g.name, member, rec)
}

func (g *verifyHTTPGroup) setNode(member, topic string, node int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.members[member] = httpMember{topic, node}
}

// stop ends the members and closes their instances, which leaves the
// group.
func (g *verifyHTTPGroup) stop() (int, string) {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	members := g.members
	g.mu.Unlock()
	for name, m := range members {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		q := url.Values{"group": {g.name}, "consumer": {name}}
		// Unknown on that node (it restarted) is as good as closed.
		g.nodes.call(ctx, m.node, http.MethodDelete, "/v1/topics/"+url.PathEscape(m.topic)+"/consume?"+q.Encode(), nil, nil)
		cancel()
	}
	return g.errs.get()
}

func (g *verifyHTTPGroup) churned() map[string]int { return map[string]int{} }
