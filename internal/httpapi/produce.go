package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

// POST /v1/topics/{topic}/produce
//
//	{"key": "user-8841", "value": "<base64>", "headers": {"k": "<base64>"},
//	 "partition": 17, "acks": "all" | "1" | "0"}
//
// key is text (JSON strings are Unicode: bytes that are not UTF-8 cannot
// be given in it); key_b64 is the key's bytes in base64, for any key.
// One or the other, not both.
//	or {"records": [ ...records as above, without acks... ], "acks": ...}
//
// One record answers {"partition", "offset", "timestamp"}; a batch
// {"results": [...]}, in request order, each a result or its own error.
// acks defaults to "all" and means what it means for a Kafka producer:
// with "all" a 200 is an fsynced, replicated record. With "0" nothing is
// waited for and the offset is -1. A null value is a tombstone.
//
// Refused whole (400), before anything is produced: malformed JSON,
// unknown fields, bad base64, a negative partition or one the topic does
// not have, an acks value not in the list, both a record and "records",
// neither, an idempotency_key that is empty, over 256 bytes, or with
// acks other than "all" (idempotency.go); an idempotency_key used
// for another record is 422 idempotency_key_reused. A body over the limit
// (Config.MaxBodyBytes) is 413 body_too_large, a record over the topic's
// max.message.bytes 413 record_too_large, each naming its limit. A
// topic that does not exist is created when the node auto-creates
// topics (--auto-create-topics: the produce's metadata request asks for
// it, as a Kafka producer's does), else 404; a name no topic may have is
// 400 bad_topic.

// produceRecord is one record of a produce request.
type produceRecord struct {
	Key            *string         `json:"key"`
	KeyB64         *string         `json:"key_b64"`
	Value          *string         `json:"value"`
	Headers        *produceHeaders `json:"headers"`
	Partition      *int32          `json:"partition"`
	IdempotencyKey *string         `json:"idempotency_key"`
}

type produceRequest struct {
	produceRecord
	Records []produceRecord `json:"records"`
	Acks    *string         `json:"acks"`
}

// produceHeaders is a produce's headers, in one of two forms:
//
//	{"name": "<base64>" | null, ...}                 in name order (an object has none of its own)
//	[{"name": "...", "value": "<base64>" | null}, ...] in its order; names may repeat
//
// A null value is a header without one (Kafka's null), "" an empty one.
type produceHeaders struct {
	list []headerJSON
}

type headerJSON struct {
	Name     *string `json:"name"`
	Value    *string `json:"value"`
	hasValue bool    // "value" was given (null or not)
}

func (h *headerJSON) UnmarshalJSON(b []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return errors.New(`a header is {"name": string, "value": base64 or null}`)
	}
	for k := range fields {
		if k != "name" && k != "value" {
			return fmt.Errorf(`header: unknown field %q (allowed: "name", "value")`, k)
		}
	}
	type plain headerJSON
	if err := json.Unmarshal(b, (*plain)(h)); err != nil {
		return errors.New(`a header is {"name": string, "value": base64 or null}`)
	}
	_, h.hasValue = fields["value"]
	return nil
}

func (h *produceHeaders) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		return json.Unmarshal(b, &h.list)
	}
	var m map[string]*string
	if err := json.Unmarshal(b, &m); err != nil {
		return errors.New(`"headers" is an object {name: base64 or null} or a list [{"name", "value"}]`)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		h.list = append(h.list, headerJSON{Name: &k, Value: m[k], hasValue: true})
	}
	return nil
}

// produceResult is one record's answer.
type produceResult struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	Timestamp int64 `json:"timestamp"`
}

func (a *API) handleProduce(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if !a.allowed(w, r, onTopic(acl.OperationWrite, topic)) {
		return
	}
	// The broker refuses it too, but franz-go passes on only the error
	// code, which names no topic; and an internal topic not created yet
	// would be 404, as if a produce could create it.
	if metadata.IsInternalTopic(topic) {
		writeError(w, &apiError{status: http.StatusBadRequest, code: "invalid_topic",
			msg: metadata.InternalTopicError(topic, "clients cannot produce to it").Error()})
		return
	}
	req, err := decodeProduce(w, r, a.cfg.MaxBodyBytes)
	if err != nil {
		writeError(w, err)
		return
	}
	acks := "all"
	if req.Acks != nil {
		acks = *req.Acks
	}
	cl, ok := a.producers[acks]
	if !ok {
		writeError(w, badRequest("bad_acks", `acks %q: allowed: "all", "1", "0"`, acks))
		return
	}
	batch := req.Records != nil
	in := req.Records
	if !batch {
		in = []produceRecord{req.produceRecord}
	}
	recs := make([]*kgo.Record, len(in))
	explicit := false
	for i, pr := range in {
		rec, err := toRecord(topic, pr)
		if err != nil {
			if batch {
				err = badRequest(err.(*apiError).code, "record %d: %s", i, err.(*apiError).msg)
			}
			writeError(w, err)
			return
		}
		explicit = explicit || pr.Partition != nil
		recs[i] = rec
	}
	// The topic must exist (404), and an explicit partition be one of
	// its: the partitioner cannot refuse a record.
	minPartitions := 0
	for _, pr := range in {
		if pr.Partition != nil {
			minPartitions = max(minPartitions, int(*pr.Partition)+1)
		}
	}
	// A missing topic is created only for a caller who may create it
	// (Kafka's Metadata with auto-creation: CREATE on the cluster or the
	// topic, asked quietly); for another it stays missing, 404.
	c := callerOf(r)
	mayCreate, _ := c.mayQuietly(onCluster(acl.OperationCreate))
	if !mayCreate {
		mayCreate, _ = c.mayQuietly(onTopic(acl.OperationCreate, topic))
	}
	ct, err := a.producedTopic(r.Context(), topic, minPartitions, mayCreate)
	if err != nil {
		writeError(w, err)
		return
	}
	td := ct.detail
	// A record over the topic's max.message.bytes is refused here, with
	// the limit named: the broker would refuse it too, in a message that
	// does not say which limit.
	for i, rec := range recs {
		if size := recordBatchBytes(rec, in[i].IdempotencyKey); ct.maxMessageBytes > 0 && size > int(ct.maxMessageBytes) {
			err := recordTooLarge(topic, ct.maxMessageBytes, fmt.Sprintf("the record, %d bytes as a batch,", size))
			if batch {
				err.msg = fmt.Sprintf("record %d: %s", i, err.msg)
			}
			writeError(w, err)
			return
		}
	}
	if explicit {
		for i, pr := range in {
			if pr.Partition != nil && int(*pr.Partition) >= len(td.Partitions) {
				writeError(w, badRequest("bad_partition", "record %d: partition %d: topic %q has partitions 0 to %d",
					i, *pr.Partition, topic, len(td.Partitions)-1))
				return
			}
		}
		if err := awaitPartitions(r.Context(), cl, topic, int32(minPartitions)); err != nil {
			writeError(w, unavailable(err))
			return
		}
	}

	if hasIdempotencyKeys(in) {
		a.produceEach(w, r, cl, topic, ct, in, recs, acks, batch)
		return
	}
	results := cl.ProduceSync(r.Context(), recs...)
	if !batch {
		if err := results[0].Err; err != nil {
			writeError(w, a.produceError(r.Context(), topic, ct, err))
			return
		}
		writeJSON(w, http.StatusOK, resultOf(results[0].Record, acks))
		return
	}
	// ProduceSync answers in the order the records completed, which
	// across partitions is not the request's.
	index := make(map[*kgo.Record]int, len(recs))
	for i, rec := range recs {
		index[rec] = i
	}
	out := make([]any, len(results))
	for _, res := range results {
		i := index[res.Record]
		if res.Err != nil {
			ae := a.produceError(r.Context(), topic, ct, res.Err)
			out[i] = errorBody{Error: ae.code, Message: ae.msg}
			continue
		}
		out[i] = resultOf(res.Record, acks)
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}

func resultOf(r *kgo.Record, acks string) produceResult {
	offset := r.Offset
	if acks == "0" {
		offset = -1 // nothing came back to say where it went
	}
	return produceResult{Partition: r.Partition, Offset: offset, Timestamp: r.Timestamp.UnixMilli()}
}

// decodeProduce reads and checks the body's shape.
func decodeProduce(w http.ResponseWriter, r *http.Request, limit int64) (*produceRequest, error) {
	var req produceRequest
	if err := decodeJSON(w, r, limit, &req); err != nil {
		return nil, err
	}
	single := req.Key != nil || req.KeyB64 != nil || req.Value != nil || req.Headers != nil || req.Partition != nil || req.IdempotencyKey != nil
	switch {
	case req.Records != nil && single:
		return nil, badRequest("malformed_request", `give one record or "records", not both`)
	case req.Records != nil && len(req.Records) == 0:
		return nil, badRequest("malformed_request", `"records" is empty`)
	case req.Records == nil && !single:
		return nil, badRequest("malformed_request", `no record: give "value" (and "key", "headers", "partition") or "records"`)
	}
	return &req, nil
}

// toRecord checks one record and builds it.
func toRecord(topic string, pr produceRecord) (*kgo.Record, error) {
	if pr.IdempotencyKey != nil && (*pr.IdempotencyKey == "" || len(*pr.IdempotencyKey) > maxIdempotencyKeyBytes) {
		return nil, badRequest("bad_idempotency_key", "idempotency_key: want 1 to %d bytes", maxIdempotencyKeyBytes)
	}
	rec := &kgo.Record{Topic: topic}
	switch {
	case pr.Key != nil && pr.KeyB64 != nil:
		return nil, badRequest("bad_key", `give the key as "key" (text) or as "key_b64" (bytes), not both`)
	case pr.Key != nil:
		rec.Key = []byte(*pr.Key)
	case pr.KeyB64 != nil:
		k, err := base64.StdEncoding.DecodeString(*pr.KeyB64)
		if err != nil {
			return nil, badRequest("bad_base64", "key_b64: %v", err)
		}
		rec.Key = k
	}
	if pr.Value != nil {
		v, err := base64.StdEncoding.DecodeString(*pr.Value)
		if err != nil {
			return nil, badRequest("bad_base64", "value: %v", err)
		}
		rec.Value = v
	}
	if pr.Headers != nil {
		for i, h := range pr.Headers.list {
			if h.Name == nil {
				return nil, badRequest("bad_header", `header %d: no "name"`, i)
			}
			if !h.hasValue {
				return nil, badRequest("bad_header", `header %q: no "value" (null for none)`, *h.Name)
			}
			hd := kgo.RecordHeader{Key: *h.Name}
			if h.Value != nil {
				v, err := base64.StdEncoding.DecodeString(*h.Value)
				if err != nil {
					return nil, badRequest("bad_base64", "header %q: %v", *h.Name, err)
				}
				hd.Value = v
			}
			rec.Headers = append(rec.Headers, hd)
		}
	}
	if pr.Partition != nil {
		if *pr.Partition < 0 {
			return nil, badRequest("bad_partition", "partition %d: must be 0 or more", *pr.Partition)
		}
		withPartition(rec, *pr.Partition)
	}
	if strings.TrimSpace(topic) == "" {
		return nil, badRequest("bad_topic", "the topic name is empty")
	}
	return rec, nil
}

// recordBatchBytes is the size of the batch of rec alone, as the
// broker measures it against max.message.bytes: the batch header and
// the record, with the idempotency key's header when it has one.
func recordBatchBytes(rec *kgo.Record, idempotencyKey *string) int {
	const batchHeaderBytes = 61
	bytesLen := func(n int) int { return varintLen(int64(n)) + n }
	body := 1 + 1 + 1 // attributes, timestamp delta 0, offset delta 0
	body += varintLen(-1)
	if rec.Key != nil {
		body += bytesLen(len(rec.Key)) - varintLen(-1)
	}
	body += varintLen(-1)
	if rec.Value != nil {
		body += bytesLen(len(rec.Value)) - varintLen(-1)
	}
	headers := len(rec.Headers)
	for _, h := range rec.Headers {
		body += bytesLen(len(h.Key)) + bytesLen(len(h.Value))
	}
	if idempotencyKey != nil {
		headers++
		body += bytesLen(len(idempotencyHeader)) + bytesLen(len(*idempotencyKey))
	}
	body += varintLen(int64(headers))
	return batchHeaderBytes + varintLen(int64(body)) + body
}

func varintLen(v int64) int { return len(binary.AppendVarint(nil, v)) }

// recordTooLarge is the answer to a record over topic's
// max.message.bytes, what is over it said in what.
func recordTooLarge(topic string, maxMessageBytes int32, what string) *apiError {
	return &apiError{status: http.StatusRequestEntityTooLarge, code: "record_too_large",
		msg: fmt.Sprintf("%s is over topic %q's max.message.bytes of %d (a setting of the topic)", what, topic, maxMessageBytes)}
}

// produceError is the answer to a record's failed produce: a batch
// refused as too large names the topic's limit, a record dropped
// because the producers were learning the topic's new limit is 503, and
// one refused by a topic whose migration has cut over is 409
// topic_migrated naming where produces go now (franz-go keeps the
// broker's message from us, so the topic's config says it).
func (a *API) produceError(ctx context.Context, topic string, ct cachedTopic, err error) *apiError {
	if errors.Is(err, kerr.InvalidTopicException) {
		if to := a.topicConfig(ctx, topic, metadata.MigratedToConfig); to != "" {
			return &apiError{status: http.StatusConflict, code: "topic_migrated",
				msg: fmt.Sprintf("topic %q was migrated to %q (fjord topic migrate): produce to %q", topic, to, to)}
		}
	}
	if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
		if ct.maxMessageBytes >= 0 {
			return recordTooLarge(topic, ct.maxMessageBytes, "the batch carrying this record")
		}
		return &apiError{status: http.StatusRequestEntityTooLarge, code: "record_too_large",
			msg: fmt.Sprintf("the batch carrying this record is over topic %q's max.message.bytes (a setting of the topic)", topic)}
	}
	if err != nil && strings.Contains(err.Error(), "purged") {
		return unavailable(fmt.Errorf("topic %q's max.message.bytes changed while this record waited to be sent; try again", topic))
	}
	return kafkaError(err)
}

func hasIdempotencyKeys(in []produceRecord) bool {
	for _, pr := range in {
		if pr.IdempotencyKey != nil {
			return true
		}
	}
	return false
}

// produceEach produces the records one at a time, those with an
// idempotency key through the index, and answers as handleProduce does.
func (a *API) produceEach(w http.ResponseWriter, r *http.Request, cl *kgo.Client, topic string, ct cachedTopic,
	in []produceRecord, recs []*kgo.Record, acks string, batch bool) {
	n := len(ct.detail.Partitions)
	if acks != "all" {
		writeError(w, badRequest("bad_acks", `idempotency_key needs acks "all": with less, where a record went is not known`))
		return
	}
	out := make([]any, len(recs))
	var firstErr error
	for i, rec := range recs {
		var res produceResult
		var err error
		if k := in[i].IdempotencyKey; k != nil {
			res, err = a.produceIdempotent(r.Context(), cl, topic, n, rec, *k, in[i].Partition)
		} else {
			var pr *kgo.Record
			if pr, err = cl.ProduceSync(r.Context(), rec).First(); err == nil {
				res = resultOf(pr, acks)
			}
		}
		if err != nil {
			ae := a.produceError(r.Context(), topic, ct, err)
			if firstErr == nil {
				firstErr = ae
			}
			out[i] = errorBody{Error: ae.code, Message: ae.msg}
			continue
		}
		out[i] = res
	}
	if !batch {
		if firstErr != nil {
			writeError(w, firstErr)
			return
		}
		writeJSON(w, http.StatusOK, out[0])
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": out})
}
