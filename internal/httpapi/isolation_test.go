package httpapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 17 over HTTP: a reader chooses Kafka's isolation.level, for a
// stateless read and for a group consume. The transactions are a real
// franz-go transactional producer's, against a real node.

// readPage is a stateless read's answer, values decoded.
type readPage struct {
	Records []struct {
		Offset int64  `json:"offset"`
		Value  string `json:"value"`
	} `json:"records"`
	NextOffset    int64 `json:"next_offset"`
	HighWatermark int64 `json:"high_watermark"`
	// A pointer: the field must be in every answer.
	LastStableOffset *int64 `json:"last_stable_offset"`
	Error            string `json:"error"`
	Message          string `json:"message"`
}

func (p readPage) values() []string {
	var vs []string
	for _, r := range p.Records {
		v, _ := base64.StdEncoding.DecodeString(r.Value)
		vs = append(vs, string(v))
	}
	return vs
}

func (p readPage) offsets() []int64 {
	var os []int64
	for _, r := range p.Records {
		os = append(os, r.Offset)
	}
	return os
}

// read reads partition 0 of topic from offset with the query's extra
// parameters (isolation, max_bytes), and requires a 200 with
// last_stable_offset.
func (e *env) read(topic string, offset int64, query string) readPage {
	e.t.Helper()
	var p readPage
	path := fmt.Sprintf("/v1/topics/%s/partitions/0/records?offset=%d%s", topic, offset, query)
	if st := e.do("GET", path, "", &p); st != 200 {
		e.t.Fatalf("GET %s: %d %+v", path, st, p)
	}
	if p.LastStableOffset == nil {
		e.t.Fatalf("GET %s: no last_stable_offset in %+v", path, p)
	}
	return p
}

// page reads partition 0 of topic from offset 0 following next_offset,
// as a client pages, until next_offset reaches end, and returns the
// values read. A page with no record that does not move next_offset
// forward is the marker bug: the client would ask for it for ever.
func (e *env) page(topic, query string, end int64) []string {
	e.t.Helper()
	var values []string
	var at int64
	for pages := 0; at < end; pages++ {
		if pages == 100 {
			e.t.Fatalf("%s: 100 pages and at %d of %d", query, at, end)
		}
		p := e.read(topic, at, query)
		if p.NextOffset < at || p.NextOffset > end || (p.NextOffset == at && len(p.Records) == 0) {
			e.t.Fatalf("%s: a read from %d answered records at %v and next_offset %d (end %d): paging with it stalls or overshoots",
				query, at, p.offsets(), p.NextOffset, end)
		}
		values = append(values, p.values()...)
		at = p.NextOffset
	}
	return values
}

// txnProducer is a transactional producer on e's node.
func (e *env) txnProducer(id string) *kgo.Client {
	e.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.n.KafkaAddr().String()), kgo.TransactionalID(id),
		kgo.TransactionTimeout(5*time.Minute)) // the open transaction must outlive the test's reads
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cl.Close)
	return cl
}

// produceValues produces each value to partition 0 of topic, a batch
// each, and returns their offsets.
func (e *env) produceValues(cl *kgo.Client, topic string, values ...string) []int64 {
	e.t.Helper()
	var offsets []int64
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Value: []byte(v)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			e.t.Fatalf("produce %s: %v", v, err)
		}
		offsets = append(offsets, r.Offset)
	}
	return offsets
}

// txn produces values in one transaction of cl and commits or aborts
// it, returning the records' offsets.
func (e *env) txn(cl *kgo.Client, topic string, commit bool, values ...string) []int64 {
	e.t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		e.t.Fatal(err)
	}
	offsets := e.produceValues(cl, topic, values...)
	if err := cl.EndTransaction(context.Background(), kgo.TransactionEndTry(commit)); err != nil {
		e.t.Fatal(err)
	}
	return offsets
}

// waitEnd waits for partition 0 of topic to end at offset: the markers
// of transactions just ended go to the partitions after EndTxn answers.
func (e *env) waitEnd(topic string, offset int64) {
	e.t.Helper()
	testutil.Eventually(e.t, 20*time.Second, func() error {
		if got := e.endOffset(topic, 0); got != offset {
			return fmt.Errorf("%s-0 ends at %d, want %d", topic, got, offset)
		}
		return nil
	})
}

func wantOffsets(t *testing.T, what string, got []int64, want ...int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s at offsets %v, want %v", what, got, want)
	}
}

// Regression: read.go dropped ProcessFetchPartition's next offset and
// answered next_offset = the last record's + 1, or the offset asked
// for when no record came. A range holding only a transaction marker
// (or, read_committed, only aborted records) then answered no records
// and next_offset = offset, and a client paging with next_offset asked
// for that range for ever. Here the log ends with an abort marker, so
// the default read, read_uncommitted, stalls on it at any max_bytes.
func TestReadPagesPastTransactionMarkers(t *testing.T) {
	e := newEnv(t)
	e.createTopic("ledger", 1)
	p := e.txnProducer("ledger-writer")
	wantOffsets(t, "committed", e.txn(p, "ledger", true, "c0", "c1"), 0, 1) // marker at 2
	wantOffsets(t, "aborted", e.txn(p, "ledger", false, "a0"), 3)           // marker at 4
	e.waitEnd("ledger", 5)

	want := []string{"c0", "c1", "a0"}
	for _, query := range []string{"", "&max_bytes=1"} {
		if got := e.page("ledger", query, 5); !slices.Equal(got, want) {
			t.Fatalf("paging %q read %v, want %v", query, got, want)
		}
	}
	// The marker alone: no record, and next_offset past it.
	if p := e.read("ledger", 4, ""); len(p.Records) != 0 || p.NextOffset != 5 {
		t.Fatalf("a read of the abort marker alone answered %v, next_offset %d; want no record and 5", p.offsets(), p.NextOffset)
	}
}

// A stateless read at each isolation, around a committed, an aborted and
// an open transaction and a plain record after them: read_uncommitted
// gives every record; read_committed gives the committed ones, stops at
// the open transaction's first offset (the last stable offset) until it
// commits, then continues with it and the plain record. Paging with
// next_offset terminates at both levels, before and after.
func TestReadIsolation(t *testing.T) {
	e := newEnv(t)
	e.createTopic("ledger", 1)
	committer := e.txnProducer("committer")
	wantOffsets(t, "committed", e.txn(committer, "ledger", true, "c0", "c1"), 0, 1) // marker at 2
	wantOffsets(t, "aborted", e.txn(committer, "ledger", false, "a0", "a1"), 3, 4)  // marker at 5
	// The next records are another producer's: wait for the abort
	// marker, or they could come before it.
	e.waitEnd("ledger", 6)
	open := e.txnProducer("open")
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, "open", e.produceValues(open, "ledger", "o0", "o1"), 6, 7)
	wantOffsets(t, "plain", e.produceValues(e.kcl, "ledger", "p0"), 8)

	all := []string{"c0", "c1", "a0", "a1", "o0", "o1", "p0"}
	for _, query := range []string{"", "&isolation=", "&isolation=read_uncommitted"} {
		p := e.read("ledger", 0, query)
		if !slices.Equal(p.values(), all) || p.NextOffset != 9 || p.HighWatermark != 9 || *p.LastStableOffset != 6 {
			t.Fatalf("read %q: %v, next_offset %d, high_watermark %d, last_stable_offset %d; want %v, 9, 9, 6",
				query, p.values(), p.NextOffset, p.HighWatermark, *p.LastStableOffset, all)
		}
	}
	const committed = "&isolation=read_committed"
	p := e.read("ledger", 0, committed)
	// next_offset is 6: past the aborted records and both markers, which
	// the read covered, and not into the open transaction.
	if !slices.Equal(p.values(), []string{"c0", "c1"}) || p.NextOffset != 6 || *p.LastStableOffset != 6 {
		t.Fatalf("read_committed: %v, next_offset %d, last_stable_offset %d; want [c0 c1], 6, 6", p.values(), p.NextOffset, *p.LastStableOffset)
	}
	for _, from := range []int64{2, 3, 6} {
		p := e.read("ledger", from, committed)
		if len(p.Records) != 0 || p.NextOffset != 6 {
			t.Fatalf("read_committed from %d while the transaction is open: %v, next_offset %d; want nothing, 6", from, p.values(), p.NextOffset)
		}
	}
	// Waiting does not get past the open transaction either.
	if p := e.read("ledger", 6, committed+"&timeout_ms=300"); len(p.Records) != 0 || p.NextOffset != 6 {
		t.Fatalf("read_committed long-poll at the last stable offset: %v, next_offset %d", p.values(), p.NextOffset)
	}
	for _, size := range []string{"", "&max_bytes=1"} {
		if got := e.page("ledger", size, 9); !slices.Equal(got, all) {
			t.Fatalf("paging read_uncommitted %q: %v, want %v", size, got, all)
		}
		if got := e.page("ledger", committed+size, 6); !slices.Equal(got, []string{"c0", "c1"}) {
			t.Fatalf("paging read_committed %q to the last stable offset: %v, want [c0 c1]", size, got)
		}
	}

	if err := open.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	e.waitEnd("ledger", 10) // its marker at 9
	want := []string{"o0", "o1", "p0"}
	testutil.Eventually(t, 10*time.Second, func() error {
		p := e.read("ledger", 6, committed)
		if !slices.Equal(p.values(), want) || p.NextOffset != 10 || *p.LastStableOffset != 10 {
			return fmt.Errorf("read_committed from 6 after the commit: %v, next_offset %d, last_stable_offset %d; want %v, 10, 10",
				p.values(), p.NextOffset, *p.LastStableOffset, want)
		}
		return nil
	})
	for _, size := range []string{"", "&max_bytes=1"} {
		if got := e.page("ledger", size, 10); !slices.Equal(got, all) {
			t.Fatalf("paging read_uncommitted %q after the commit: %v, want %v", size, got, all)
		}
		if got, want := e.page("ledger", committed+size, 10), []string{"c0", "c1", "o0", "o1", "p0"}; !slices.Equal(got, want) {
			t.Fatalf("paging read_committed %q after the commit: %v, want %v", size, got, want)
		}
	}
}

// consumeValues consumes at path until partition 0's next offset
// reaches next, and returns the values handed out.
func (e *env) consumeValues(path string, next int64) []string {
	e.t.Helper()
	var values []string
	testutil.Eventually(e.t, 30*time.Second, func() error {
		var c consumed
		if st := e.do("GET", path, "", &c); st != 200 {
			return fmt.Errorf("consume: %d %+v", st, c)
		}
		for _, r := range c.Records {
			v, _ := base64.StdEncoding.DecodeString(*r.Value)
			values = append(values, string(v))
		}
		if at := c.NextOffsets["0"]; at < next {
			return fmt.Errorf("consumed %v, at %d of %d", values, at, next)
		}
		return nil
	})
	return values
}

// A group consume at read_committed hands out exactly the committed
// transactions' records, one at read_uncommitted (here by default) the
// aborted ones too. A consume naming the other level than the running
// instance's is 409 and changes nothing: the instance hands out the
// records it would have, in order, to the next consume, which reads at
// the instance's level when it names none.
func TestConsumeIsolation(t *testing.T) {
	e := newEnv(t)
	e.createTopic("ledger", 1)
	p := e.txnProducer("ledger-writer")
	wantOffsets(t, "c0 c1", e.txn(p, "ledger", true, "c0", "c1"), 0, 1) // marker at 2
	wantOffsets(t, "a0", e.txn(p, "ledger", false, "a0"), 3)            // marker at 4
	wantOffsets(t, "c2", e.txn(p, "ledger", true, "c2"), 5)             // marker at 6
	e.waitEnd("ledger", 7)

	const rc = "/v1/topics/ledger/consume?group=rc&auto_offset_reset=earliest&timeout_ms=300"
	const ru = "/v1/topics/ledger/consume?group=ru&auto_offset_reset=earliest&timeout_ms=300"
	if got, want := e.consumeValues(rc+"&isolation=read_committed", 6), []string{"c0", "c1", "c2"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed consume: %v, want %v", got, want)
	}
	if got, want := e.consumeValues(ru, 6), []string{"c0", "c1", "a0", "c2"}; !slices.Equal(got, want) {
		t.Fatalf("default (read_uncommitted) consume: %v, want %v", got, want)
	}

	// More to read, then the mismatches: a consume served at the wrong
	// level would take these records from the instance.
	wantOffsets(t, "a1", e.txn(p, "ledger", false, "a1"), 7) // marker at 8
	wantOffsets(t, "c3", e.txn(p, "ledger", true, "c3"), 9)  // marker at 10
	e.waitEnd("ledger", 11)
	for _, tc := range []struct{ path, running, asked string }{
		{rc + "&isolation=read_uncommitted", "read_committed", "read_uncommitted"},
		{ru + "&isolation=read_committed", "read_uncommitted", "read_committed"},
	} {
		var res result
		st := e.do("GET", tc.path, "", &res)
		if st != 409 || res.Error != "isolation_mismatch" ||
			!strings.Contains(res.Message, "reads "+tc.running+", not "+tc.asked) {
			t.Fatalf("%s: %d %+v, want 409 isolation_mismatch naming %s and %s", tc.path, st, res, tc.running, tc.asked)
		}
	}
	for _, g := range []string{"rc", "ru"} {
		d, err := e.adm.DescribeGroups(context.Background(), g)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(d[g].Members); n != 1 {
			t.Fatalf("group %s has %d members after the refused consumes, want its one instance", g, n)
		}
	}
	if got := e.consumeValues(rc, 10); !slices.Equal(got, []string{"c3"}) {
		t.Fatalf("read_committed instance, consumed without isolation: %v, want [c3]", got)
	}
	if got, want := e.consumeValues(ru+"&isolation=read_uncommitted", 10), []string{"a1", "c3"}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted instance: %v, want %v", got, want)
	}
}

// Bad isolation values, on both reads: each is 400 bad_isolation, with
// a message that names the valid ones and does not echo a long value
// whole; no consumer instance starts, and a running one is not touched.
// Empty is the default. The document describes the parameter.
func TestIsolationBadValues(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 1)
	bad := []string{
		"READ_COMMITTED", "Read_Committed", "1", "0", "true", "committed", "read-committed",
		"read_committed ", " read_committed", "read_committed\x00", "read_committed,read_uncommitted",
		strings.Repeat("read_committed", 500),
		"read_commıtted",       // dotless i
		"rеad_committed",       // Cyrillic е
		"read_committed\u200b", // zero-width space
		"ＲＥＡＤ＿ＣＯＭＭＩＴＴＥＤ",       // fullwidth
		"\xff\xfe",
	}
	check := func(path string) {
		t.Helper()
		var res result
		st := e.do("GET", path, "", &res)
		if st != 400 || res.Error != "bad_isolation" ||
			!strings.Contains(res.Message, "read_committed or read_uncommitted") || len(res.Message) > 300 {
			t.Errorf("GET %.100s: %d %+v, want 400 bad_isolation naming the valid values, briefly", path, st, res)
		}
	}
	for _, v := range bad {
		check("/v1/topics/t/partitions/0/records?isolation=" + url.QueryEscape(v))
		check("/v1/topics/t/consume?group=hostile&timeout_ms=0&isolation=" + url.QueryEscape(v))
		// The value is checked before the topic is looked up.
		check("/v1/topics/nope/consume?group=hostile&isolation=" + url.QueryEscape(v))
	}
	groups, err := e.adm.ListGroups(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := groups["hostile"]; ok {
		t.Fatal("a refused consume started a consumer instance: group hostile exists")
	}

	// Empty is the default; then the running instance refuses bad values
	// the same way, and still serves.
	var p readPage
	if st := e.do("GET", "/v1/topics/t/partitions/0/records?isolation=", "", &p); st != 200 {
		t.Fatalf("isolation= on a read: %d %+v", st, p)
	}
	const consume = "/v1/topics/t/consume?group=hostile&timeout_ms=0"
	var c consumed
	if st := e.do("GET", consume+"&isolation=", "", &c); st != 200 {
		t.Fatalf("isolation= on a consume: %d %+v", st, c)
	}
	for _, v := range bad[:3] {
		check(consume + "&isolation=" + url.QueryEscape(v))
	}
	if st := e.do("GET", consume+"&isolation=read_uncommitted", "", &c); st != 200 {
		t.Fatalf("the default instance, consumed naming read_uncommitted: %d %+v", st, c)
	}

	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name string } `json:"parameters"`
		} `json:"paths"`
	}
	if st := e.do("GET", "/v1/openapi.json", "", &doc); st != 200 {
		t.Fatalf("openapi.json: %d", st)
	}
	for _, path := range []string{"/v1/topics/{topic}/partitions/{partition}/records", "/v1/topics/{topic}/consume"} {
		if !slices.ContainsFunc(doc.Paths[path]["get"].Parameters, func(p struct{ Name string }) bool { return p.Name == "isolation" }) {
			t.Errorf("openapi.json: GET %s does not describe isolation", path)
		}
	}
}
