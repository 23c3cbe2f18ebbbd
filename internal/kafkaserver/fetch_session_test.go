package kafkaserver

// Reference: KIP-227 (incremental fetch sessions).

import (
	"math"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionFetch builds a session fetch (MinBytes 0: answer at once).
func sessionFetch(version int16, id, epoch int32, parts ...fetchPart) *kmsg.FetchRequest {
	req := fetchReq(version, 0, 0, parts...)
	req.SessionID, req.SessionEpoch = id, epoch
	return req
}

func partitionsOf(resp *kmsg.FetchResponse) []int32 {
	var ps []int32
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			ps = append(ps, p.Partition)
		}
	}
	slices.Sort(ps)
	return ps
}

// A session's life: a full fetch opens it; incremental fetches answer
// only partitions with news (records, a moved high watermark, errors);
// updated partitions and forgotten topics change what it reads; a bad
// epoch and an unknown id are refused; epoch -1 closes it.
func TestFetchSessionLifecycle(t *testing.T) {
	h := newWireHarness(t)
	h.ctrl.addTopic("t", 3)
	h.produce(t, "t", 0, "p0", 1)
	c := h.dial()

	all := []fetchPart{{topic: "t", partition: 0}, {topic: "t", partition: 1}, {topic: "t", partition: 2}}
	resp := c.roundTrip(sessionFetch(12, 0, 0, all...)).(*kmsg.FetchResponse)
	id := resp.SessionID
	if resp.ErrorCode != 0 || id == 0 {
		t.Fatalf("full fetch: error %d session %d", resp.ErrorCode, id)
	}
	if got := partitionsOf(resp); !slices.Equal(got, []int32{0, 1, 2}) {
		t.Fatalf("full fetch answered %v", got)
	}

	// The client moves partition 0 past the record it got, as real
	// clients do; nothing is new anywhere, so the answer is empty.
	resp = c.roundTrip(sessionFetch(12, id, 1, fetchPart{topic: "t", partition: 0, offset: 1})).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != id || len(partitionsOf(resp)) != 0 {
		t.Fatalf("epoch 1: error %d session %d partitions %v", resp.ErrorCode, resp.SessionID, partitionsOf(resp))
	}

	// New records on partition 1 only.
	h.produce(t, "t", 1, "p1", 2)
	resp = c.roundTrip(sessionFetch(12, id, 2)).(*kmsg.FetchResponse)
	if got := partitionsOf(resp); !slices.Equal(got, []int32{1}) {
		t.Fatalf("epoch 2 answered %v, want [1]", got)
	}
	p1 := fetched(resp)[fetchPart{topic: "t", partition: 1}]
	if vals := values(t, p1.RecordBatches); len(vals) != 2 || p1.HighWatermark != 2 {
		t.Fatalf("epoch 2 partition 1: %v hw %d", vals, p1.HighWatermark)
	}

	// The client moves partition 1's offset: nothing new to tell.
	resp = c.roundTrip(sessionFetch(12, id, 3, fetchPart{topic: "t", partition: 1, offset: 2})).(*kmsg.FetchResponse)
	if got := partitionsOf(resp); len(got) != 0 {
		t.Fatalf("epoch 3 answered %v", got)
	}

	// Forget partition 2, then produce to it: it is no longer answered.
	forget := sessionFetch(12, id, 4)
	forget.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "t", Partitions: []int32{2}}}
	if got := partitionsOf(c.roundTrip(forget).(*kmsg.FetchResponse)); len(got) != 0 {
		t.Fatalf("epoch 4 answered %v", got)
	}
	h.produce(t, "t", 2, "p2", 1)
	if got := partitionsOf(c.roundTrip(sessionFetch(12, id, 5)).(*kmsg.FetchResponse)); len(got) != 0 {
		t.Fatalf("forgotten partition answered: %v", got)
	}
	// Producing to a partition still in the session is news.
	h.produce(t, "t", 0, "p0", 1)
	if got := partitionsOf(c.roundTrip(sessionFetch(12, id, 6)).(*kmsg.FetchResponse)); !slices.Equal(got, []int32{0}) {
		t.Fatalf("epoch 6 answered %v, want [0]", got)
	}

	// Wrong epochs and ids.
	for _, tc := range []struct {
		id, epoch int32
		want      *kerr.Error
	}{
		{id, 6, kerr.InvalidFetchSessionEpoch}, // already used
		{id, 9, kerr.InvalidFetchSessionEpoch}, // skipped ahead
		{id, -2, kerr.InvalidFetchSessionEpoch},
		{id + 1, 7, kerr.FetchSessionIDNotFound},
	} {
		resp := c.roundTrip(sessionFetch(12, tc.id, tc.epoch)).(*kmsg.FetchResponse)
		if resp.ErrorCode != tc.want.Code || len(resp.Topics) != 0 {
			t.Fatalf("id %d epoch %d: error %d, %d topics; want %s", tc.id, tc.epoch, resp.ErrorCode, len(resp.Topics), tc.want)
		}
	}
	// A refused epoch does not advance the session: 7 still works.
	if resp := c.roundTrip(sessionFetch(12, id, 7)).(*kmsg.FetchResponse); resp.ErrorCode != 0 {
		t.Fatalf("epoch 7 after refusals: error %d", resp.ErrorCode)
	}

	// Epoch -1 closes the session and answers a full sessionless fetch.
	resp = c.roundTrip(sessionFetch(12, id, -1, fetchPart{topic: "t", partition: 2})).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != 0 || !slices.Equal(partitionsOf(resp), []int32{2}) {
		t.Fatalf("close: error %d session %d partitions %v", resp.ErrorCode, resp.SessionID, partitionsOf(resp))
	}
	if resp := c.roundTrip(sessionFetch(12, id, 8)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d", resp.ErrorCode)
	}
	if n := h.srv.sessions.len(); n != 0 {
		t.Fatalf("%d sessions cached after close", n)
	}
}

// Sessions work by topic id from v13, and a session is bound to the way
// it names topics.
func TestFetchSessionTopicIDs(t *testing.T) {
	h := newWireHarness(t)
	tp := h.ctrl.addTopic("t", 2)
	c := h.dial()
	resp := c.roundTrip(sessionFetch(13, 0, 0, fetchPart{id: tp.ID, partition: 0}, fetchPart{id: tp.ID, partition: 1})).(*kmsg.FetchResponse)
	id := resp.SessionID
	if id == 0 || len(resp.Topics) != 1 || resp.Topics[0].TopicID != tp.ID {
		t.Fatalf("full v13: %+v", resp)
	}
	h.produce(t, "t", 1, "x", 1)
	resp = c.roundTrip(sessionFetch(16, id, 1)).(*kmsg.FetchResponse)
	if got := partitionsOf(resp); !slices.Equal(got, []int32{1}) || resp.Topics[0].TopicID != tp.ID {
		t.Fatalf("incremental v16: %v %+v", got, resp.Topics)
	}
	resp = c.roundTrip(sessionFetch(12, id, 2)).(*kmsg.FetchResponse)
	if resp.ErrorCode != kerr.FetchSessionTopicIDError.Code {
		t.Fatalf("v12 in a v13 session: error %d", resp.ErrorCode)
	}
}

// The cache holds max.incremental.fetch.session.cache.slots sessions and
// evicts the least recently used.
func TestFetchSessionEviction(t *testing.T) {
	h := newWireHarness(t, withConfig(func(c *Config) { c.FetchSessionCacheSlots = 2 }))
	h.ctrl.addTopic("t", 1)
	c := h.dial()
	open := func() int32 {
		resp := c.roundTrip(sessionFetch(12, 0, 0, fetchPart{topic: "t"})).(*kmsg.FetchResponse)
		if resp.SessionID == 0 {
			t.Fatal("no session opened")
		}
		return resp.SessionID
	}
	a, b := open(), open()
	// Use a, so b is the least recently used.
	if resp := c.roundTrip(sessionFetch(12, a, 1)).(*kmsg.FetchResponse); resp.ErrorCode != 0 {
		t.Fatalf("a: %d", resp.ErrorCode)
	}
	cc := open()
	if resp := c.roundTrip(sessionFetch(12, b, 1)).(*kmsg.FetchResponse); resp.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("evicted b: error %d", resp.ErrorCode)
	}
	for _, id := range []int32{a, cc} {
		epoch := int32(1)
		if id == a {
			epoch = 2
		}
		if resp := c.roundTrip(sessionFetch(12, id, epoch)).(*kmsg.FetchResponse); resp.ErrorCode != 0 {
			t.Fatalf("session %d: error %d", id, resp.ErrorCode)
		}
	}
	if n := h.srv.sessions.len(); n != 2 {
		t.Fatalf("%d sessions cached", n)
	}
}

// With the cache disabled a full fetch with epoch 0 is answered without a
// session (id 0), which clients accept.
func TestFetchSessionCacheDisabled(t *testing.T) {
	h := newWireHarness(t, withConfig(func(c *Config) { c.FetchSessionCacheSlots = -1 }))
	h.ctrl.addTopic("t", 1)
	resp := h.dial().roundTrip(sessionFetch(12, 0, 0, fetchPart{topic: "t"})).(*kmsg.FetchResponse)
	if resp.ErrorCode != 0 || resp.SessionID != 0 || len(resp.Topics) != 1 {
		t.Fatalf("%+v", resp)
	}
}

// The pure rules, without the wire.
func TestFetchSessionRules(t *testing.T) {
	if got := nextSessionEpoch(math.MaxInt32); got != 1 {
		t.Fatalf("epoch after MaxInt32: %d, want 1 (0 and -1 are special)", got)
	}
	if got := nextSessionEpoch(5); got != 6 {
		t.Fatalf("epoch after 5: %d", got)
	}

	sp := &sessionPartition{}
	base := partState{highWatermark: 10, lastStableOffset: 10, logStartOffset: 0}
	if !sp.news(base) {
		t.Fatal("never-sent partition has no news")
	}
	sp.sent, sp.sentOnce = base, true
	cases := []struct {
		name string
		mod  func(*partState)
		news bool
	}{
		{"unchanged", func(*partState) {}, false},
		{"records", func(p *partState) { p.hasRecords = true }, true},
		{"error", func(p *partState) { p.errCode = kerr.NotLeaderForPartition.Code }, true},
		{"high watermark", func(p *partState) { p.highWatermark++ }, true},
		{"last stable offset", func(p *partState) { p.lastStableOffset-- }, true},
		{"log start offset", func(p *partState) { p.logStartOffset++ }, true},
	}
	for _, tc := range cases {
		r := base
		tc.mod(&r)
		if got := sp.news(r); got != tc.news {
			t.Errorf("%s: news=%v, want %v", tc.name, got, tc.news)
		}
	}

	// Updating a session partition keeps its place; adding appends;
	// forgetting removes and reindexes.
	c := newFetchSessionCache(10)
	k := func(p int32) sessionPartKey { return sessionPartKey{topic: "t", partition: p} }
	fc := c.newContext(0, 0, false, []fetchReqPartition{{key: k(0)}, {key: k(1)}, {key: k(2)}}, nil)
	fc.update(make([]partState, 3))
	fc = c.newContext(fc.sessionID, 1, false, []fetchReqPartition{{key: k(1), fetchOffset: 9}, {key: k(3)}}, []sessionPartKey{k(0)})
	var order []int32
	for _, p := range fc.parts {
		order = append(order, p.key.partition)
	}
	if !slices.Equal(order, []int32{1, 2, 3}) || fc.parts[0].fetchOffset != 9 {
		t.Fatalf("session partitions %v (first offset %d)", order, fc.parts[0].fetchOffset)
	}
	// Partition 3 was never answered, so it is news even with nothing new.
	if inc := fc.update(make([]partState, 3)); !slices.Equal(inc, []bool{false, false, true}) {
		t.Fatalf("include %v", inc)
	}
}

// The partitions that returned records go to the end of the session's
// order, so the next fetch reads the others first (Kafka's rotation):
// byte limits that fill from the first partition cannot keep serving the
// same one.
func TestFetchSessionRotatesPartitionsWithRecords(t *testing.T) {
	c := newFetchSessionCache(10)
	k := func(p int32) sessionPartKey { return sessionPartKey{topic: "t", partition: p} }
	fc := c.newContext(0, 0, false, []fetchReqPartition{{key: k(0)}, {key: k(1)}, {key: k(2)}, {key: k(3)}}, nil)
	order := func() []int32 {
		s := c.get(fc.sessionID)
		s.mu.Lock()
		defer s.mu.Unlock()
		var out []int32
		for i, sp := range s.mu.parts {
			if s.mu.index[sp.key] != i {
				t.Fatalf("index of %v is %d, its place %d", sp.key, s.mu.index[sp.key], i)
			}
			out = append(out, sp.key.partition)
		}
		return out
	}
	fc.update([]partState{{hasRecords: true}, {}, {hasRecords: true}, {}})
	if got := order(); !slices.Equal(got, []int32{1, 3, 0, 2}) {
		t.Fatalf("after 0 and 2 returned records: order %v, want [1 3 0 2]", got)
	}
	fc = c.newContext(fc.sessionID, 1, false, nil, nil)
	fc.update([]partState{{hasRecords: true}, {}, {}, {}}) // partition 1, first now
	if got := order(); !slices.Equal(got, []int32{3, 0, 2, 1}) {
		t.Fatalf("after 1 returned records: order %v, want [3 0 2 1]", got)
	}
	fc = c.newContext(fc.sessionID, 2, false, nil, nil)
	fc.update([]partState{{hasRecords: true}, {hasRecords: true}, {hasRecords: true}, {hasRecords: true}})
	if got := order(); !slices.Equal(got, []int32{3, 0, 2, 1}) {
		t.Fatalf("all returned records: order %v, want it unchanged", got)
	}
}
