package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/failpoint"
	"github.com/fjordmq/fjord/internal/poison"
)

// Poison records (issue 18): a record that fails processing every time
// neither stalls its partition silently nor vanishes silently. A client
// of an instance in ack_mode=records reports a failed record with
// POST .../nack; each nack counts an attempt at that offset, and the
// record comes again, until the group's policy for the topic
// (internal/poison, set with PUT /v1/groups/{group}/poison/{topic} or
// `fjord group poison set`) says enough:
//
//   - pause: the partition stops for the group at that offset (a pause
//     record in the policies topic, so every node's instances and
//     `fjord group describe` see it, and it survives the node), named in
//     a log line, in fjord_http_poison_paused and in each consume's
//     `paused`, until POST /v1/groups/{group}/resume (optionally
//     skipping the record into the dead-letter topic);
//   - dlq: the record is written to the dead-letter topic (acks=all,
//     idempotent) with its coordinates, the group and the reason in
//     headers, and only then acknowledged, so the commit moves past it.
//     A crash in between delivers it again, and it may be written again:
//     at-least-once, which `fjord dlq replay` deduplicates.
//
// Without a policy a nack only redelivers. Attempts are counted in the
// instance's memory: a move of the partition or the node's loss starts
// them again.

// policies returns the node's view of the policies topic, opening it on
// first use (it creates the topic if missing and loads it).
func (a *API) policies(ctx context.Context) (*poison.Store, error) {
	a.policyStore.Lock()
	defer a.policyStore.Unlock()
	if a.policyStore.s != nil {
		return a.policyStore.s, nil
	}
	s, err := poison.Open(ctx, a.cfg.Brokers, append(slices.Clone(a.cfg.KafkaOpts), kgo.ClientID(a.cfg.InternalClientID))...)
	if err != nil {
		return nil, unavailable(fmt.Errorf("opening the consumer policies (%s): %w", poison.Topic, err))
	}
	a.policyStore.s = s
	return s, nil
}

// policyStoreOnce holds the opened store.
type policyStoreOnce struct {
	sync.Mutex
	s *poison.Store
}

type nackRequest struct {
	deliveredBy
	Partition *int32 `json:"partition"`
	Offset    *int64 `json:"offset"`
	Reason    string `json:"reason"`
}

// maxReasonBytes bounds a nack's reason: it travels in a header and a
// pause record.
const maxReasonBytes = 4096

// POST /v1/topics/{topic}/nack reports a record handed out by an
// instance in ack_mode=records as failed. Answers the action taken:
// redeliver (the record, and what followed it in the partition, come
// again), paused, or dead_lettered.
func (a *API) handleNack(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var req nackRequest
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := req.check(); err != nil {
		writeError(w, err)
		return
	}
	// A member's request. A dead-letter it causes is written under the
	// group's policy, whose setter was checked for WRITE on the
	// dead-letter topic, and is checked again below, for this caller,
	// when it comes to that (AUTHZ.md).
	if !a.allowed(w, r, consumerNeeds(req.Group, topic)...) {
		return
	}
	switch {
	case req.Partition == nil || *req.Partition < 0:
		writeError(w, badRequest("bad_partition", "partition is required: the failed record's"))
		return
	case req.Offset == nil || *req.Offset < 0:
		writeError(w, badRequest("bad_offset", "offset is required: the failed record's"))
		return
	case len(req.Reason) > maxReasonBytes:
		writeError(w, badRequest("bad_reason", "reason is %d bytes, more than %d", len(req.Reason), maxReasonBytes))
		return
	}
	p, offset := *req.Partition, *req.Offset
	store, err := a.policies(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	in, err := a.ackingInstance(req.key(r, topic), *req.Generation)
	if err != nil {
		writeError(w, err)
		return
	}
	defer in.release()
	rec := in.delivered(p, offset)
	if rec == nil || in.deliveries[p].acked[offset] {
		writeError(w, notDelivered(topic, p, offset))
		return
	}
	if in.attempts[p] == nil {
		in.attempts[p] = map[int64]int32{}
	}
	in.attempts[p][offset]++
	attempts := in.attempts[p][offset]
	pol, hasPolicy := store.Policy(req.Group, topic)
	out := map[string]any{"partition": p, "offset": offset, "attempts": attempts, "max_attempts": nil}
	if hasPolicy {
		out["max_attempts"] = pol.MaxAttempts
	}
	switch {
	case !hasPolicy || attempts < pol.MaxAttempts:
		in.rewind(p, offset)
		out["action"] = "redeliver"
	case pol.Action == poison.ActionPause:
		pz := poison.Pause{Group: req.Group, Topic: topic, Partition: p, Offset: offset, Reason: req.Reason, Attempts: attempts, At: time.Now()}
		if err := store.Pause(r.Context(), pz); err != nil {
			in.attempts[p][offset]-- // not paused: the attempt counts again with the next nack
			writeError(w, unavailable(fmt.Errorf("recording the pause: %w", err)))
			return
		}
		failpoint.Hit("poison.pause-written")
		in.pause(pz)
		a.log.Warn("consumer group paused a partition at a poison record",
			slog.String("group", req.Group), slog.String("topic", topic), slog.Int("partition", int(p)),
			slog.Int64("offset", offset), slog.Int("attempts", int(attempts)), slog.String("reason", clip(req.Reason, 256)))
		out["action"] = "paused"
	default:
		// The gateway writes as the node: the nacking principal must be
		// one that may write the dead-letter topic now, so that a WRITE
		// revoked after the policy was set stops taking effect (as a
		// Kafka client copying the record itself would be refused). The
		// attempt does not count: refused, the record is not skipped.
		if err := a.authorize(r, onTopic(acl.OperationWrite, pol.DeadLetterTopic())); err != nil {
			in.attempts[p][offset]--
			writeError(w, err)
			return
		}
		dlq, err := a.deadLetter(r.Context(), poison.DeadLetter(rec, pol.DeadLetterTopic(), req.Group, req.Reason, attempts))
		if err != nil {
			in.attempts[p][offset]--
			writeError(w, err)
			return
		}
		failpoint.Hit("poison.dead-letter-written")
		delete(in.attempts[p], offset)
		if next, moved := in.ackPrefix(p, []int64{offset}); moved {
			in.toCommit[p] = next
		}
		committed, err := in.commitAcked(r)
		if err != nil {
			writeError(w, err)
			return
		}
		failpoint.Hit("poison.dead-letter-committed")
		a.metrics.deadLettered.WithLabelValues(labelValue(req.Group), topic).Inc()
		out["action"], out["dlq"], out["committed"] = "dead_lettered", dlq, committed
	}
	writeJSON(w, http.StatusOK, out)
}

// deadLetter writes rec (poison.DeadLetter's) with acks=all and says
// where it went.
func (a *API) deadLetter(ctx context.Context, rec *kgo.Record) (map[string]any, error) {
	if err := a.producers["all"].ProduceSync(ctx, rec).FirstErr(); err != nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, code: "dlq_unavailable",
			msg: fmt.Sprintf("writing to the dead-letter topic %q failed, so the record was not skipped: %v", rec.Topic, err)}
	}
	return map[string]any{"topic": rec.Topic, "partition": rec.Partition, "offset": rec.Offset}, nil
}

// pause stops delivering partition p at pz.Offset: what was fetched and
// handed out from there is dropped, and fetching stops until the pause
// goes. REQUIRES: in.mu held.
func (in *instance) pause(pz poison.Pause) {
	in.rewind(pz.Partition, pz.Offset)
	in.cl.PauseFetchPartitions(map[string][]int32{in.key.topic: {pz.Partition}})
	in.paused[pz.Partition] = pz
	in.metrics.paused.WithLabelValues(labelValue(in.key.group), in.key.topic, strconv.Itoa(int(pz.Partition))).Set(float64(pz.Offset))
}

// unpause lets p be fetched again from offset. REQUIRES: in.mu held.
func (in *instance) unpause(p int32, offset int64) {
	delete(in.paused, p)
	in.metrics.paused.DeleteLabelValues(labelValue(in.key.group), in.key.topic, strconv.Itoa(int(p)))
	delete(in.attempts, p)
	in.cl.ResumeFetchPartitions(map[string][]int32{in.key.topic: {p}})
	in.rewind(p, offset)
}

// labelValue is a group id fit for a Prometheus label: client_golang
// panics on invalid UTF-8, which a group id may hold; runs of invalid
// bytes become U+FFFD (the node's lag series, node/metrics_text.go, do
// the same byte by byte).
func labelValue(group string) string { return strings.ToValidUTF8(group, "\uFFFD") }

// forgetPaused drops the paused gauge's series of a closing instance:
// its partitions' pauses stay in the policies topic, for the next owner
// to report. REQUIRES: in.mu held.
func (in *instance) forgetPaused() {
	for p := range in.paused {
		in.metrics.paused.DeleteLabelValues(labelValue(in.key.group), in.key.topic, strconv.Itoa(int(p)))
	}
}

// syncPauses brings the instance's owned partitions in line with the
// policies topic before a consume hands anything out: a pause recorded
// by another node's instance (the partition moved here) holds here too;
// a pause resumed holds no more (delivery starts again at the paused
// offset); a pause resolved with a skip is committed past by the owner,
// this instance. It returns the owned partitions paused.
// REQUIRES: in.mu held.
func (a *API) syncPauses(r *http.Request, in *instance) ([]poison.Pause, error) {
	store, err := a.policies(r.Context())
	if err != nil {
		return nil, err
	}
	stored := map[int32]poison.Pause{}
	for _, pz := range store.Pauses(in.key.group, in.key.topic) {
		stored[pz.Partition] = pz
	}
	for p, local := range in.paused {
		if _, ok := stored[p]; !ok {
			in.unpause(p, local.Offset)
		}
	}
	var out []poison.Pause
	for p, pz := range stored {
		if !in.owns(p) {
			continue
		}
		if pz.Skip {
			if err := a.skipPaused(r, in, store, pz); err != nil {
				return nil, err
			}
			continue
		}
		if _, ok := in.paused[p]; !ok {
			in.pause(pz)
		}
		// Records fetched before the pause took hold are not handed out.
		in.dropPending(p)
		out = append(out, pz)
	}
	return out, nil
}

// skipPaused commits past a paused record whose pause was resolved with
// a skip (its dead-letter copy is written), as the partition's owner,
// and removes the pause. REQUIRES: in.mu held.
func (a *API) skipPaused(r *http.Request, in *instance, store *poison.Store, pz poison.Pause) error {
	in.toCommit[pz.Partition] = pz.Offset + 1
	if _, err := in.commitAcked(r); err != nil {
		return err
	}
	failpoint.Hit("poison.skip-committed")
	if _, _, err := store.Resume(r.Context(), pz.Group, pz.Topic, pz.Partition); err != nil {
		return unavailable(fmt.Errorf("removing the skipped pause: %w", err))
	}
	in.unpause(pz.Partition, pz.Offset+1)
	return nil
}

// pausedJSON is a paused partition in answers.
type pausedJSON struct {
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Reason    string `json:"reason"`
	Attempts  int32  `json:"attempts"`
	At        int64  `json:"at_ms"`
	// Skip: resumed with a skip that the partition's owner has not
	// carried out yet.
	Skip bool `json:"skip,omitempty"`
}

func pausedOf(pz poison.Pause, withTopic bool) pausedJSON {
	out := pausedJSON{Partition: pz.Partition, Offset: pz.Offset, Reason: pz.Reason, Attempts: pz.Attempts, At: pz.At.UnixMilli(), Skip: pz.Skip}
	if withTopic {
		out.Topic = pz.Topic
	}
	return out
}

type policyBody struct {
	Policy      string `json:"policy"`
	MaxAttempts *int32 `json:"max_attempts"`
	DLQTopic    string `json:"dlq_topic"`
}

// PUT /v1/groups/{group}/poison/{topic} sets the group's poison-record
// policy for the topic; a dlq policy's dead-letter topic is created if
// it does not exist. An invalid policy is 400 and changes nothing.
func (a *API) handleSetPolicy(w http.ResponseWriter, r *http.Request) {
	group, topic := r.PathValue("group"), r.PathValue("topic")
	var body policyBody
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &body); err != nil {
		writeError(w, err)
		return
	}
	pol := poison.Policy{Group: group, Topic: topic, Action: poison.Action(body.Policy), DLQTopic: body.DLQTopic}
	if body.MaxAttempts != nil {
		pol.MaxAttempts = *body.MaxAttempts
	}
	if err := pol.Validate(); err != nil {
		writeError(w, badRequest("bad_policy", "%v", err))
		return
	}
	// A policy is the group's configuration (ALTER_CONFIGS on the
	// group); setting one looks the topic up (DESCRIBE). A dlq policy
	// copies the group's failed records out of the topic into its
	// dead-letter topic, which only a principal who may read the one
	// (READ, which implies DESCRIBE) and write the other may ask for:
	// otherwise DESCRIBE alone would let a principal have another's
	// records copied where it can read them.
	source := onTopic(acl.OperationDescribe, topic)
	if pol.Action == poison.ActionDLQ {
		source = onTopic(acl.OperationRead, topic)
	}
	needs := []need{onGroup(acl.OperationAlterConfigs, group), source}
	if pol.Action == poison.ActionDLQ {
		needs = append(needs, onTopic(acl.OperationWrite, pol.DeadLetterTopic()))
	}
	if !a.allowed(w, r, needs...) {
		return
	}
	if _, err := a.topicPartitions(r.Context(), topic); err != nil {
		writeError(w, err)
		return
	}
	if pol.Action == poison.ActionDLQ {
		if !a.allowedToEnsure(w, r, pol.DeadLetterTopic()) {
			return
		}
		if err := poison.EnsureDLQTopic(r.Context(), a.adm, pol.DeadLetterTopic()); err != nil {
			writeError(w, unavailable(err))
			return
		}
	}
	store, err := a.policies(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if err := store.SetPolicy(r.Context(), pol); err != nil {
		if errors.Is(err, poison.ErrInvalidPolicy) {
			writeError(w, badRequest("bad_policy", "%v", err))
			return
		}
		writeError(w, unavailable(err))
		return
	}
	writeJSON(w, http.StatusOK, policyJSON(pol))
}

func policyJSON(p poison.Policy) map[string]any {
	out := map[string]any{"group": p.Group, "topic": p.Topic, "policy": string(p.Action), "max_attempts": p.MaxAttempts}
	if p.Action == poison.ActionDLQ {
		out["dlq_topic"] = p.DeadLetterTopic()
	}
	return out
}

// GET /v1/groups/{group}/poison lists the group's policies and paused
// partitions.
func (a *API) handleGetPolicies(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	if !a.allowed(w, r, onGroup(acl.OperationDescribe, group)) {
		return
	}
	store, err := a.policies(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	// Topics the caller may not describe are left out, as from a
	// group's description.
	c := callerOf(r)
	visible := func(topic string) bool {
		ok, _ := c.mayQuietly(onTopic(acl.OperationDescribe, topic))
		return ok
	}
	policies := []map[string]any{}
	for _, p := range store.Policies(group) {
		if visible(p.Topic) {
			policies = append(policies, policyJSON(p))
		}
	}
	paused := []pausedJSON{}
	for _, pz := range store.Pauses(group, "") {
		if visible(pz.Topic) {
			paused = append(paused, pausedOf(pz, true))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "policies": policies, "paused": paused})
}

// DELETE /v1/groups/{group}/poison/{topic} clears the group's policy for
// the topic (nacks only redeliver again); pauses stay until resumed.
func (a *API) handleClearPolicy(w http.ResponseWriter, r *http.Request) {
	group, topic := r.PathValue("group"), r.PathValue("topic")
	if !a.allowed(w, r, onGroup(acl.OperationAlterConfigs, group)) {
		return
	}
	store, err := a.policies(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	_, had := store.Policy(group, topic)
	if err := store.ClearPolicy(r.Context(), group, topic); err != nil {
		writeError(w, unavailable(err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "topic": topic, "cleared": had})
}

type resumeRequest struct {
	Topic     string `json:"topic"`
	Partition *int32 `json:"partition"`
	Skip      bool   `json:"skip"`
}

// POST /v1/groups/{group}/resume ends a pause: delivery starts again at
// the paused record, or, with skip, after it, once the record is in the
// dead-letter topic (the policy's, or <topic>.dlq).
func (a *API) handleResume(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	var req resumeRequest
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	switch {
	case req.Topic == "":
		writeError(w, badRequest("bad_topic", "topic is required"))
		return
	case req.Partition == nil || *req.Partition < 0:
		writeError(w, badRequest("bad_partition", "partition is required"))
		return
	}
	// A resume commits past the pause (an OffsetCommit's needs); with
	// skip it also writes the record to the dead-letter topic, creating
	// it if missing, which the caller must be allowed to do.
	if !a.allowed(w, r, consumerNeeds(group, req.Topic)...) {
		return
	}
	store, err := a.policies(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if req.Skip {
		// The policy as Resume will read it: one set on another node a
		// moment ago names the topic written to.
		if err := store.Sync(r.Context()); err != nil {
			writeError(w, unavailable(err))
			return
		}
		dlq := poison.DefaultDLQTopic(req.Topic)
		if pol, ok := store.Policy(group, req.Topic); ok {
			dlq = pol.DeadLetterTopic()
		}
		if !a.allowed(w, r, onTopic(acl.OperationWrite, dlq)) || !a.allowedToEnsure(w, r, dlq) {
			return
		}
	}
	res, err := poison.Resume(r.Context(), store, a.reader, a.producers["all"], group, req.Topic, *req.Partition, req.Skip)
	switch {
	case errors.Is(err, poison.ErrNotPaused):
		writeError(w, &apiError{status: http.StatusNotFound, code: "not_paused",
			msg: fmt.Sprintf("group %q has no pause on partition %d of topic %q", group, *req.Partition, req.Topic)})
		return
	case err != nil:
		writeError(w, unavailable(err))
		return
	}
	out := map[string]any{"group": group, "topic": req.Topic, "partition": *req.Partition, "offset": res.Pause.Offset, "skipped": req.Skip}
	if res.DeadLetter != nil {
		out["dlq"] = map[string]any{"topic": res.DeadLetter.Topic, "partition": res.DeadLetter.Partition, "offset": res.DeadLetter.Offset}
	}
	out["committed"] = res.Committed
	writeJSON(w, http.StatusOK, out)
}
