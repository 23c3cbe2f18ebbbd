package httpapi

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
)

// GET /v1/topics/{topic}/partitions/{p}/records?offset=N&max_bytes=M&timeout_ms=T&isolation=I
//
// A stateless read, without a group: the records of one partition from
// offset N (default: the log start), at most max_bytes of them (default
// and cap: Config.MaxReadBytes; the first record comes whole whatever its
// size, as Kafka's fetch rule), waiting up to timeout_ms (default 0, at
// most 30 s) for at least one when there are none yet. The answer:
//
//	{"records": [{"partition", "offset", "key", "key_b64", "value",
//	  "headers", "timestamp"}], "next_offset": N', "high_watermark": H,
//	 "last_stable_offset": S, "log_start_offset": L}
//
// headers is {name: base64 or null}, the last header of each name;
// header_list, [{"name", "value"}] in order, comes too when a name
// repeats. A record with a key has key_b64, its bytes in base64, and key, the
// same as text when it is UTF-8, else null: never a string with bytes
// replaced. A record without one has key null and no key_b64.
//
// isolation is Kafka's isolation.level: read_uncommitted (the default,
// as Kafka's consumers') reads to the high watermark, records of open and
// aborted transactions included; read_committed reads to the last stable
// offset (the first offset of the oldest transaction still open on the
// partition, else the high watermark) and drops aborted transactions'
// records, as the fetch answer lists them. Anything else is 400
// bad_isolation. last_stable_offset is in every answer, whatever the
// level: a read_uncommitted reader can see how far read_committed ones
// have got.
//
// next_offset is where the next read continues: the offset after
// everything the answer covered, which is past the last record returned
// and also past the transaction markers (control batches) and aborted
// records that were read and dropped. A range holding only those returns
// no records and a next_offset past them, so a client that pages with
// next_offset never stops at a marker. It is never below N; with
// read_committed it is at most the last stable offset, where the
// broker's read stops. An offset outside the log is 416
// offset_out_of_range; an unknown topic or partition 404.

type readRecord struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
	// Key is the key as text, null when there is none or it is not
	// UTF-8; KeyB64 is its bytes whenever there is one (keyJSON).
	Key    *string `json:"key"`
	KeyB64 *string `json:"key_b64,omitempty"`
	Value  *string `json:"value"`
	// Headers are the headers by name, the last of each name (as
	// Kafka's lastHeader), null for a header without a value;
	// HeaderList is every header in order, given only when a name
	// repeats (headersJSON).
	Headers    map[string]*string `json:"headers,omitempty"`
	HeaderList []headerOut        `json:"header_list,omitempty"`
	Timestamp  int64              `json:"timestamp"`
}

type readResponse struct {
	Records       []readRecord `json:"records"`
	NextOffset    int64        `json:"next_offset"`
	HighWatermark int64        `json:"high_watermark"`
	// LastStableOffset is the fetch answer's, for either isolation.
	LastStableOffset int64 `json:"last_stable_offset"`
	LogStartOffset   int64 `json:"log_start_offset"`
}

func (a *API) handleRead(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if !a.allowed(w, r, onTopic(acl.OperationRead, topic)) {
		return
	}
	partition, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || partition < 0 {
		writeError(w, badRequest("bad_partition", "partition %q: want 0 or more", r.PathValue("partition")))
		return
	}
	q := r.URL.Query()
	offset, err := queryInt(q.Get("offset"), -2, 0, 1<<62)
	if err != nil {
		writeError(w, badRequest("bad_offset", "offset %q: want 0 or more", q.Get("offset")))
		return
	}
	maxBytes, err := queryInt(q.Get("max_bytes"), int64(a.cfg.MaxReadBytes), 1, int64(a.cfg.MaxReadBytes))
	if err != nil {
		writeError(w, badRequest("bad_max_bytes", "max_bytes %q: want 1 to %d", q.Get("max_bytes"), a.cfg.MaxReadBytes))
		return
	}
	waitMs, err := queryInt(q.Get("timeout_ms"), 0, 0, maxReadWait.Milliseconds())
	if err != nil {
		writeError(w, badRequest("bad_timeout", "timeout_ms %q: want 0 to %d", q.Get("timeout_ms"), maxReadWait.Milliseconds()))
		return
	}
	level, _, err := parseIsolation(q.Get("isolation"))
	if err != nil {
		writeError(w, err)
		return
	}

	td, err := a.topicPartitions(r.Context(), topic)
	if err != nil {
		writeError(w, err)
		return
	}
	pd, ok := td.Partitions[int32(partition)]
	if !ok {
		writeError(w, &apiError{status: http.StatusNotFound, code: "unknown_partition",
			msg: "topic " + strconv.Quote(topic) + " has no partition " + strconv.FormatInt(partition, 10)})
		return
	}
	if pd.Err != nil || pd.Leader < 0 {
		writeError(w, unavailable(kerr.LeaderNotAvailable))
		return
	}

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(waitMs)
	req.MinBytes = 1
	req.MaxBytes = int32(maxBytes)
	// The broker stops a read_committed fetch at the last stable offset
	// and lists the aborted transactions in what it returns; dropping
	// their records is the reader's work (ProcessFetchPartition below).
	req.IsolationLevel = int8(level)
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, td.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(partition), offset, int32(maxBytes)
	rp.CurrentLeaderEpoch, rp.LogStartOffset = -1, -1
	if offset == -2 { // the log start: the broker tells us where that is
		lo, err := a.adm.ListStartOffsets(r.Context(), topic)
		if err != nil {
			writeError(w, unavailable(err))
			return
		}
		o, _ := lo.Lookup(topic, int32(partition))
		if o.Err != nil {
			writeError(w, o.Err)
			return
		}
		rp.FetchOffset = o.Offset
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx := r.Context()
	resp, err := a.reader.Broker(int(pd.Leader)).Request(ctx, req)
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	fr := resp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(fr.ErrorCode); err != nil {
		writeError(w, err)
		return
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
		writeError(w, unavailable(kerr.UnknownServerError))
		return
	}
	part := &fr.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
		writeError(w, err)
		return
	}
	fp, covered := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset: rp.FetchOffset, Topic: topic, Partition: int32(partition), IsolationLevel: level.kgo(),
	}, part, kgo.DefaultDecompressor(), nil)
	if fp.Err != nil {
		writeError(w, fp.Err)
		return
	}
	// covered is the offset after the last whole batch read: records,
	// control batches (markers) and aborted batches alike. next_offset
	// used to be the last record's offset + 1, or the offset asked for
	// when no record came, so a range of markers or aborted records only
	// answered next_offset = offset and a client paging with it asked for
	// the same range for ever. franz-go never puts covered below either
	// (a batch cut short by max_bytes leaves it where the batch starts);
	// the max()es keep next_offset from going back should that change.
	out := readResponse{Records: []readRecord{}, NextOffset: max(covered, rp.FetchOffset), HighWatermark: part.HighWatermark,
		LastStableOffset: part.LastStableOffset, LogStartOffset: part.LogStartOffset}
	for _, rec := range fp.Records {
		out.Records = append(out.Records, recordJSON(rec))
		out.NextOffset = max(out.NextOffset, rec.Offset+1)
	}
	writeJSON(w, http.StatusOK, out)
}

// keyJSON is a record key as readRecord gives it: as text when it is
// UTF-8, and as base64 whenever there is one. Go's JSON encoder would
// replace each byte that is not UTF-8 with U+FFFD, so such a key has no
// text form.
func keyJSON(key []byte) (text, b64 *string) {
	if key == nil {
		return nil, nil
	}
	enc := base64.StdEncoding.EncodeToString(key)
	if !utf8.Valid(key) {
		return nil, &enc
	}
	s := string(key)
	return &s, &enc
}

type headerOut struct {
	Name  string  `json:"name"`
	Value *string `json:"value"`
}

// headersJSON is a record's headers as readRecord gives them.
func headersJSON(hs []kgo.RecordHeader) (map[string]*string, []headerOut) {
	if len(hs) == 0 {
		return nil, nil
	}
	m := make(map[string]*string, len(hs))
	list := make([]headerOut, len(hs))
	for i, h := range hs {
		list[i] = headerOut{Name: h.Key}
		if h.Value != nil {
			v := base64.StdEncoding.EncodeToString(h.Value)
			list[i].Value = &v
		}
		m[h.Key] = list[i].Value
	}
	if len(m) == len(hs) {
		return m, nil
	}
	return m, list
}

// isolation is a read's isolation level, Kafka's isolation.level, with
// its wire values (FetchRequest.IsolationLevel).
type isolation int8

const (
	readUncommitted isolation = 0
	readCommitted   isolation = 1
)

func (i isolation) String() string {
	if i == readCommitted {
		return "read_committed"
	}
	return "read_uncommitted"
}

// kgo is the level as franz-go names it.
func (i isolation) kgo() kgo.IsolationLevel {
	if i == readCommitted {
		return kgo.ReadCommitted()
	}
	return kgo.ReadUncommitted()
}

// parseIsolation parses the isolation query parameter: empty is
// read_uncommitted, Kafka's consumer default, and named says whether the
// request gave one (a consume that names none takes its instance's). The
// names are Kafka's, lower case only, as auto_offset_reset's: a value
// that is almost right ("READ_COMMITTED", "1") is refused rather than
// guessed at, since guessing wrong reads records the client did not mean
// to see.
func parseIsolation(s string) (level isolation, named bool, err error) {
	switch s {
	case "":
		return readUncommitted, false, nil
	case "read_uncommitted":
		return readUncommitted, true, nil
	case "read_committed":
		return readCommitted, true, nil
	}
	return 0, false, badRequest("bad_isolation", "isolation %q: want read_committed or read_uncommitted (the default)", clip(s, 64))
}

// clip is s cut to at most n bytes, on a character boundary, marked
// with "..." when cut: an error message echoes what the client sent
// without echoing a URL's worth of it.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// queryInt parses a query parameter in [min, max]; empty is def.
func queryInt(s string, def, min, max int64) (int64, error) {
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < min || v > max {
		return 0, strconv.ErrRange
	}
	return v, nil
}
