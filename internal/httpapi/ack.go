package httpapi

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Per-record acknowledgement (issue 18): a consumer instance started
// with ack_mode=records keeps, per partition, the records it handed out
// and which of them the client acknowledged (POST .../ack) or reported
// failed (POST .../nack, poison.go), and commits only the contiguous
// acknowledged prefix: with 42 and 44 acknowledged and 43 not, the
// commit stays at 43. Offsets commits (POST .../commit) still work and
// move past whatever they name.
//
// Each consume answers the member's generation, and an ack or nack names
// the generation its records were delivered in: one from an older
// generation is refused (409 stale_generation), since the group may have
// given the partition to another member meanwhile. When the generation
// changes under an instance that still owns partitions, the records it
// handed out and that were not acknowledged come again in the new
// generation (the instance rewinds to the first of them): at-least-once,
// with acks that always name the current generation.
//
// The records handed out and not committed past are held in memory, at
// most maxHeld per instance: past it, a consume hands out nothing more
// until acks let the commit move (unacked_limit in its answer). They are lost with the
// node, and then delivered again to the next owner: at-least-once.
//
// Rejected: keeping per-record state in the group's committed metadata
// (Kafka's OffsetCommit metadata string): bounded by the coordinator's
// metadata size, and written on every ack.

// ackMode is how an instance's records are acknowledged.
type ackMode int

const (
	// ackOffsets: the client commits offsets (POST .../commit).
	ackOffsets ackMode = iota
	// ackRecords: the client acknowledges records one by one.
	ackRecords
)

func (m ackMode) String() string {
	if m == ackRecords {
		return "records"
	}
	return "offsets"
}

func parseAckMode(s string) (mode ackMode, named bool, err error) {
	switch s {
	case "":
		return ackOffsets, false, nil
	case "offsets":
		return ackOffsets, true, nil
	case "records":
		return ackRecords, true, nil
	}
	return 0, false, badRequest("bad_ack_mode", "ack_mode %q: want records (acknowledge each record: ack and nack) or offsets (the default: commit offsets)", clip(s, 64))
}

// maxHeld bounds the records an instance holds handed out and not
// committed past (their bytes are held for a dead-letter write).
const maxHeld = 10_000

// maxAckOffsets bounds the offsets one ack names.
const maxAckOffsets = 10_000

// delivery is a partition's records handed out and not yet committed
// past, in offset order, and which are acknowledged.
type delivery struct {
	records []*kgo.Record
	acked   map[int64]bool
}

// trackDelivered notes records handed out. REQUIRES: in.mu held.
func (in *instance) trackDelivered(records []*kgo.Record) {
	for _, r := range records {
		d := in.deliveries[r.Partition]
		if d == nil {
			d = &delivery{acked: map[int64]bool{}}
			in.deliveries[r.Partition] = d
		}
		d.records = append(d.records, r)
		in.held++
	}
}

// unacked counts the records handed out and not acknowledged.
// REQUIRES: in.mu held.
func (in *instance) unacked() int {
	n := 0
	for _, d := range in.deliveries {
		n += len(d.records) - len(d.acked)
	}
	return n
}

// forgetDeliveries drops partition p's handed-out records (it moved, or
// it is read again from elsewhere). REQUIRES: in.mu held.
func (in *instance) forgetDeliveries(p int32) {
	if d := in.deliveries[p]; d != nil {
		in.held -= len(d.records)
		delete(in.deliveries, p)
	}
}

// delivered returns the record handed out at offset in p and not yet
// committed past, or nil. REQUIRES: in.mu held.
func (in *instance) delivered(p int32, offset int64) *kgo.Record {
	d := in.deliveries[p]
	if d == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(d.records, offset, func(r *kgo.Record, o int64) int { return cmp.Compare(r.Offset, o) })
	if !ok {
		return nil
	}
	return d.records[i]
}

// ackPrefix marks offsets acknowledged in p and returns the offset to
// commit (the one after the contiguous acknowledged prefix) and whether
// it moved. REQUIRES: in.mu held; every offset delivered.
func (in *instance) ackPrefix(p int32, offsets []int64) (next int64, moved bool) {
	d := in.deliveries[p]
	for _, o := range offsets {
		d.acked[o] = true
	}
	n := 0
	for n < len(d.records) && d.acked[d.records[n].Offset] {
		delete(d.acked, d.records[n].Offset)
		next = d.records[n].Offset + 1
		n++
	}
	if n == 0 {
		return 0, false
	}
	d.records = d.records[n:]
	in.held -= n
	if len(d.records) == 0 {
		delete(in.deliveries, p)
	}
	return next, true
}

// applyMoves forgets the deliveries and attempts of partitions that came
// or went since the last request: franz-go starts them anew at the
// committed offset. REQUIRES: in.mu held.
func (in *instance) applyMoves() {
	for _, p := range in.takeMoved() {
		in.forgetDeliveries(p)
		delete(in.toCommit, p)
		delete(in.attempts, p)
	}
}

// rewind makes partition p be read again from offset: what was fetched
// and not handed out is dropped, and so is what was handed out from
// offset on (it comes again). REQUIRES: in.mu held.
func (in *instance) rewind(p int32, offset int64) {
	in.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{in.key.topic: {p: {Epoch: -1, Offset: offset}}})
	in.dropPending(p)
	if d := in.deliveries[p]; d != nil {
		i, _ := slices.BinarySearchFunc(d.records, offset, func(r *kgo.Record, o int64) int { return cmp.Compare(r.Offset, o) })
		for _, r := range d.records[i:] {
			delete(d.acked, r.Offset)
		}
		in.held -= len(d.records) - i
		d.records = d.records[:i]
		if len(d.records) == 0 {
			delete(in.deliveries, p)
		}
	}
	in.seeked(p, offset)
}

// dropPending drops p's records fetched and not handed out.
// REQUIRES: in.mu held.
func (in *instance) dropPending(p int32) {
	kept := in.pending[:0]
	for _, r := range in.pending {
		if r.Partition != p {
			kept = append(kept, r)
		}
	}
	in.pending = kept
}

// generation is the member's current generation (-1 before it joined).
func (in *instance) generation() int32 {
	_, gen := in.cl.GroupMetadata()
	return gen
}

// syncGeneration, at a consume in ack_mode=records, redelivers what was
// handed out in an older generation and not acknowledged: acks of it
// would name that generation and be refused. It returns the current
// generation. REQUIRES: in.mu held.
func (in *instance) syncGeneration() int32 {
	gen := in.generation()
	if gen == in.deliveredGen {
		return gen
	}
	for p, d := range in.deliveries {
		if in.owns(p) && len(d.records) > 0 {
			in.rewind(p, d.records[0].Offset)
		} else {
			in.forgetDeliveries(p)
		}
	}
	in.deliveredGen = gen
	return gen
}

// deliveredBy names, in an ack or nack, the instance that handed the
// records out and the generation it did so in.
type deliveredBy struct {
	Group      string `json:"group"`
	Consumer   string `json:"consumer"`
	Generation *int32 `json:"generation"`
}

// check refuses a missing group or generation.
func (d deliveredBy) check() *apiError {
	switch {
	case d.Group == "":
		return badRequest("bad_group", "group is required")
	case d.Generation == nil:
		return badRequest("bad_generation", "generation is required: the one the consume that delivered the records answered")
	}
	return nil
}

// key is the instance's key: the caller's own (consume.go).
func (d deliveredBy) key(r *http.Request, topic string) instanceKey {
	return instanceKey{principal: callerOf(r).principal, group: d.Group, topic: topic, consumer: d.Consumer}
}

type ackRequest struct {
	deliveredBy
	Offsets map[string][]int64 `json:"offsets"`
}

// POST /v1/topics/{topic}/ack acknowledges records an instance in
// ack_mode=records handed out, by partition and offset, in the
// generation they were delivered in; the group's commit moves to the end
// of each partition's contiguous acknowledged prefix. An offset not
// handed out (or already committed past) is 409 not_delivered, and
// nothing is acknowledged.
func (a *API) handleAck(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var req ackRequest
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := req.check(); err != nil {
		writeError(w, err)
		return
	}
	// An ack moves the group's commit: an OffsetCommit's needs.
	if !a.allowed(w, r, consumerNeeds(req.Group, topic)...) {
		return
	}
	switch {
	case len(req.Offsets) == 0:
		writeError(w, badRequest("bad_offsets", `offsets is empty: give {"<partition>": [offset, ...]}`))
		return
	}
	byPart := map[int32][]int64{}
	total := 0
	for ps, offs := range req.Offsets {
		p, err := strconv.ParseInt(ps, 10, 32)
		if err != nil || p < 0 {
			writeError(w, badRequest("bad_partition", "partition %q: want a partition number", clip(ps, 32)))
			return
		}
		total += len(offs)
		if total > maxAckOffsets {
			writeError(w, badRequest("bad_offsets", "more than %d offsets in one ack", maxAckOffsets))
			return
		}
		byPart[int32(p)] = offs
	}
	in, err := a.ackingInstance(req.key(r, topic), *req.Generation)
	if err != nil {
		writeError(w, err)
		return
	}
	defer in.release()
	// Every offset is checked before any is acknowledged.
	for p, offs := range byPart {
		for _, o := range offs {
			if in.delivered(p, o) == nil {
				writeError(w, notDelivered(topic, p, o))
				return
			}
		}
	}
	for p, offs := range byPart {
		if next, moved := in.ackPrefix(p, offs); moved {
			in.toCommit[p] = next
		}
	}
	committed, err := in.commitAcked(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"committed": committed, "unacked": in.unacked()})
}

// release ends a request on the instance.
func (in *instance) release() {
	in.lastUsed = time.Now()
	in.mu.Unlock()
}

// ackingInstance returns, locked, the instance for key, which must run
// on this node in ack_mode=records at generation gen.
func (a *API) ackingInstance(key instanceKey, gen int32) (*instance, error) {
	in := a.consumers.lockLive(key)
	if in == nil {
		return nil, &apiError{status: http.StatusNotFound, code: "unknown_consumer",
			msg: fmt.Sprintf("no consumer instance of group %q on topic %q (consumer %q) runs on this node: acknowledge on the node that delivered the records", key.group, key.topic, key.consumer)}
	}
	if in.ackMode != ackRecords {
		in.mu.Unlock()
		return nil, &apiError{status: http.StatusConflict, code: "ack_mode",
			msg: "the consumer instance commits offsets: start it with ack_mode=records to acknowledge records one by one"}
	}
	in.applyMoves()
	if cur := in.generation(); gen != cur || gen != in.deliveredGen {
		in.mu.Unlock()
		return nil, &apiError{status: http.StatusConflict, code: "stale_generation",
			msg: fmt.Sprintf("generation %d is not the member's current one (%d): the group rebalanced since these records were delivered, and they come again; acknowledge them as the next consume delivers them", gen, cur)}
	}
	return in, nil
}

func notDelivered(topic string, p int32, offset int64) *apiError {
	return &apiError{status: http.StatusConflict, code: "not_delivered",
		msg: fmt.Sprintf("partition %d of topic %q: offset %d was not handed out by this consumer instance, or it was acknowledged and committed already; nothing was acknowledged", p, topic, offset)}
}

// commitAcked commits, as the instance's member, the ends of the
// acknowledged prefixes not committed yet (toCommit), and returns them
// by partition. One that fails stays in toCommit, for the next ack: the
// acknowledgement itself is kept. REQUIRES: in.mu held.
func (in *instance) commitAcked(r *http.Request) (map[string]int64, error) {
	out := map[string]int64{}
	if len(in.toCommit) == 0 {
		return out, nil
	}
	offsets := map[int32]kgo.EpochOffset{}
	for p, o := range in.toCommit {
		offsets[p] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var commitErr error
	in.cl.CommitOffsetsSync(r.Context(), map[string]map[int32]kgo.EpochOffset{in.key.topic: offsets},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			commitErr = commitResponseError(resp, err)
		})
	if commitErr != nil {
		ae := commitError(commitErr)
		ae.msg = "acknowledged, but committing failed (retried with the next ack): " + ae.msg
		return nil, ae
	}
	for p, eo := range offsets {
		out[strconv.Itoa(int(p))] = eo.Offset
		delete(in.toCommit, p)
	}
	return out, nil
}
