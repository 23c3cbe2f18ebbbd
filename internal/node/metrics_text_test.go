package node

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fjordmq/fjord/internal/grouplag"
	"github.com/fjordmq/fjord/internal/replica"
)

// parseExposition parses body with Prometheus's own text parser, which
// also refuses a family that appears twice (a second HELP or TYPE).
func parseExposition(t testing.TB, body []byte) map[string]*dto.MetricFamily {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, body)
	}
	return fams
}

// Label values are escaped as the text format says, and what is not
// UTF-8 becomes U+FFFD byte by byte: Prometheus's parser reads each
// back as the value meant (the same value, for valid UTF-8).
func TestAppendLabelValue(t *testing.T) {
	for _, c := range []struct{ in, written, parsed string }{
		{"orders", `orders`, "orders"},
		{`say "hi"`, `say \"hi\"`, `say "hi"`},
		{`C:\dir\`, `C:\\dir\\`, `C:\dir\`},
		{"two\nlines", `two\nlines`, "two\nlines"},
		{`\"` + "\n", `\\\"\n`, `\"` + "\n"},
		{`\n`, `\\n`, `\n`}, // a backslash and an n, not a line feed
		{"grüße 🌊", "grüße 🌊", "grüße 🌊"},
		{"\uFFFD", "\uFFFD", "\uFFFD"},
		{"\xff", "\uFFFD", "\uFFFD"},
		{"a\xff\xfeb", "a\uFFFD\uFFFDb", "a\uFFFD\uFFFDb"},
		{"\xe2\x82", "\uFFFD\uFFFD", "\uFFFD\uFFFD"}, // a cut-off rune
		{"ok\xc0\"", "ok\uFFFD\\\"", "ok\uFFFD\""},
		{"tab\there", "tab\there", "tab\there"},
	} {
		written := string(appendLabelValue([]byte("prefix:"), c.in))
		if written != "prefix:"+c.written {
			t.Errorf("%q written as %q, want %q", c.in, written, "prefix:"+c.written)
			continue
		}
		line := fmt.Sprintf("# TYPE x gauge\nx{group=\"%s\"} 1\n", written[len("prefix:"):])
		fams := parseExposition(t, []byte(line))
		if got := fams["x"].GetMetric()[0].GetLabel()[0].GetValue(); got != c.parsed {
			t.Errorf("%q parsed back as %q, want %q", c.in, got, c.parsed)
		}
	}
}

// Values read back as the float64 they were: integers written whole,
// the rest as client_golang writes them.
func TestAppendSampleValue(t *testing.T) {
	for _, v := range []float64{0, 1, -1, 5, 10_000_000, 1 << 40, 1<<53 - 1, 1 << 53, 1e21, -3, 0.001, 3540.123, 1765012345.123, 1.5e-9} {
		written := string(appendSampleValue(nil, v))
		got, err := strconv.ParseFloat(written, 64)
		if err != nil || got != v {
			t.Errorf("%v written as %q, read back as %v (%v)", v, written, got, err)
		}
	}
	if got := string(appendSampleValue(nil, 10_000_000)); got != "10000000" {
		t.Errorf("10,000,000 written as %q", got)
	}
}

// Group ids a client may choose: quotes, backslashes, line feeds, other
// scripts. (Bytes that are not UTF-8 are in TestMetricsHandler: the
// client_golang reference refuses them.)
var hostileGroups = []string{"\U0001F30A waves", `back\slash`, `quote"d`, "new\nline", `\"` + "\n" + `\n`}

// testCollector has made-up rows: followers known and not, and lag rows
// of groups on two topics (one with a quote in its name), with lost
// records and retention margins on some, as of testNow.
func testCollector(groups []string, maxLagRows int) textCollector {
	var rows []grouplag.Row
	for _, g := range slices.Sorted(slices.Values(groups)) {
		for _, topic := range []string{"orders", "pay\"ments"} {
			for p := range int32(3) {
				r := grouplag.Row{Group: g, Topic: topic, Partition: p, Committed: 10, HighWatermark: 10 + int64(p)*7}
				r.Records, r.Bytes, r.Age = int64(p)*7, int64(p)*1_000_000_000, time.Duration(p)*1500*time.Millisecond
				if p == 2 {
					r.LostTotal, r.DeleteAt = 42, testNow.Add(90*time.Second+250*time.Millisecond)
				}
				rows = append(rows, r)
			}
		}
	}
	snap := &grouplag.Snapshot{At: testNow.Add(-time.Second), Took: 1500 * time.Microsecond, Rows: rows, Unknown: 2}
	return textCollector{
		followers: func(visit func(replica.FollowerLag)) {
			visit(replica.FollowerLag{Topic: "orders", Partition: 1, Follower: 3, Records: -1})
			visit(replica.FollowerLag{Topic: "orders", Partition: 1, Follower: 2, Records: 5})
		},
		lag:        func() *grouplag.Snapshot { return snap },
		maxLagRows: maxLagRows,
	}
}

var testNow = time.UnixMilli(1_765_012_345_678)

// testScrape is testCollector's rows read, and partitions of topics with
// characters to escape and figures past float64's exact integers.
func testScrape(groups []string, maxLagRows int) *textScrape {
	s := new(textScrape)
	testCollector(groups, maxLagRows).read(s, testNow)
	// Logs cannot be made up: the partitions' figures are set here.
	s.partitions = []partitionFigures{
		{topic: "orders", partition: 0, logStart: 0, logEnd: 10, highWatermark: 10, size: 1 << 40},
		{topic: "orders", partition: 1, logStart: 3, logEnd: 12, highWatermark: 11, size: 4096, lsoLag: 2, retentionMargin: 3540.125, hasMargin: true},
		{topic: `pay"me\nts`, partition: 10, logEnd: 1 << 53, highWatermark: 1<<53 - 1},
	}
	s.appendRowLabels()
	return s
}

// clientGolangReference sends the families textCollector's rows make as
// client_golang's const metrics, the path metrics_text.go replaced: the
// tests compare the two, and the benchmark times it.
type clientGolangReference struct{ scrape func() *textScrape }

func (clientGolangReference) Describe(ch chan<- *prometheus.Desc) { textCollector{}.Describe(ch) }

func (c clientGolangReference) Collect(ch chan<- prometheus.Metric) {
	s := c.scrape()
	for _, f := range textFamilies {
		desc := prometheus.NewDesc(f.name, f.help, labelNames[f.rows], nil)
		typ := prometheus.GaugeValue
		if f.counter {
			typ = prometheus.CounterValue
		}
		for i := range s.rowCount(f.rows) {
			if v, ok := f.value(s, i); ok {
				var labels labelValues
				s.rowLabels(f.rows, i, &labels)
				ch <- prometheus.MustNewConstMetric(desc, typ, v, labels...)
			}
		}
	}
}

// labelValues collects a row's label values (textScrape.rowLabels).
type labelValues []string

func (v *labelValues) str(s string) { *v = append(*v, s) }
func (v *labelValues) int(i int32)  { *v = append(*v, strconv.Itoa(int(i))) }

// canonical is fams as sorted lines: a family's name, type and help,
// then each series' sorted labels and value; comparable across
// expositions whatever their order.
func canonical(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for name, f := range fams {
		out = append(out, fmt.Sprintf("%s %s %q", name, f.GetType(), f.GetHelp()))
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(labels)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out = append(out, fmt.Sprintf("%s{%s} %v", name, strings.Join(labels, ","), v))
		}
	}
	slices.Sort(out)
	return out
}

// The families written here are the ones client_golang served before
// them, by name, type and label names: what dashboards and alerts use.
// (TestTextFamiliesMatchClientGolang takes these from textFamilies
// itself; this list does not.)
func TestTextFamiliesAsBefore(t *testing.T) {
	want := map[string]string{
		"fjord_partition_log_start_offset":                   "gauge partition,topic",
		"fjord_partition_log_end_offset":                     "gauge partition,topic",
		"fjord_partition_high_watermark":                     "gauge partition,topic",
		"fjord_partition_size_bytes":                         "gauge partition,topic",
		"fjord_partition_last_stable_lag_records":            "gauge partition,topic",
		"fjord_partition_retention_margin_seconds":           "gauge partition,topic",
		"fjord_follower_lag_records":                         "gauge follower,partition,topic",
		"fjord_consumer_group_lag":                           "gauge group,topic",
		"fjord_consumer_group_lag_records":                   "gauge group,partition,topic",
		"fjord_consumer_group_lag_bytes":                     "gauge group,partition,topic",
		"fjord_consumer_group_lag_seconds":                   "gauge group,partition,topic",
		"fjord_consumer_group_records_lost_total":            "counter group,partition,topic",
		"fjord_consumer_group_retention_margin_seconds":      "gauge group,partition,topic",
		"fjord_consumer_group_lag_series_dropped":            "gauge ",
		"fjord_consumer_group_lag_unknown":                   "gauge ",
		"fjord_consumer_group_lag_refresh_timestamp_seconds": "gauge ",
		"fjord_consumer_group_lag_refresh_duration_seconds":  "gauge ",
	}
	got := map[string]string{}
	for _, f := range textFamilies {
		typ := "gauge"
		if f.counter {
			typ = "counter"
		}
		got[f.name] = typ + " " + strings.Join(labelNames[f.rows], ",")
	}
	if !maps.Equal(got, want) {
		t.Fatalf("families written here:\n%v\nwant\n%v", got, want)
	}
}

// The families written here are the series client_golang wrote for the
// same rows: the same names, help, types, label sets and values, none
// more and none fewer (absent families included: lost records and
// margins only where there are some, the bound's dropped rows gone).
func TestTextFamiliesMatchClientGolang(t *testing.T) {
	for _, maxRows := range []int{maxLagRows, 7, 0} {
		s := testScrape(hostileGroups, maxRows)
		body, err := s.appendExposition(nil, nil, textFamilies, expfmt.NewFormat(expfmt.TypeTextPlain), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := parseExposition(t, body)

		reg := prometheus.NewRegistry()
		reg.MustRegister(clientGolangReference{func() *textScrape { return s }})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		enc := expfmt.NewEncoder(&want, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			if err := enc.Encode(mf); err != nil {
				t.Fatal(err)
			}
		}
		if g, w := canonical(got), canonical(parseExposition(t, want.Bytes())); !slices.Equal(g, w) {
			t.Fatalf("maxLagRows %d: written here\n%s\nclient_golang\n%s", maxRows, strings.Join(g, "\n"), strings.Join(w, "\n"))
		}
		// Every family of each row set, with its rows cut to the bound.
		wantRows := min(len(hostileGroups)*6, maxRows)
		if n := len(got["fjord_consumer_group_lag_records"].GetMetric()); n != wantRows {
			t.Errorf("maxLagRows %d: %d lag rows, want %d", maxRows, n, wantRows)
		}
		if d := got["fjord_consumer_group_lag_series_dropped"].GetMetric()[0].GetGauge().GetValue(); int(d) != len(hostileGroups)*6-wantRows {
			t.Errorf("maxLagRows %d: %v dropped, want %d", maxRows, d, len(hostileGroups)*6-wantRows)
		}
		for _, name := range []string{"fjord_partition_retention_margin_seconds", "fjord_follower_lag_records", "fjord_consumer_group_lag_refresh_timestamp_seconds"} {
			if len(got[name].GetMetric()) == 0 {
				t.Errorf("maxLagRows %d: no %s", maxRows, name)
			}
		}
	}
}

// The handler answers one exposition: the registry's families and those
// written here merged in name order, each once, in the text format's
// content type (as promhttp sends it), gzipped when asked, with
// promhttp's name[] filter. A group id that is not UTF-8 is served
// (as U+FFFD), not the end of the scrape or the process.
func TestMetricsHandler(t *testing.T) {
	reg := prometheus.NewRegistry()
	before := prometheus.NewCounter(prometheus.CounterOpts{Name: "fjord_a_total", Help: "Sorts first."})
	between := prometheus.NewGauge(prometheus.GaugeOpts{Name: "fjord_consumer_group_lag_other", Help: "Sorts among the lag families.", ConstLabels: prometheus.Labels{"why": `a "quoted" value`}})
	after := prometheus.NewGauge(prometheus.GaugeOpts{Name: "zz_last", Help: "Sorts last.\nTwo lines."})
	reg.MustRegister(before, between, after)
	before.Add(3)
	tc := testCollector(append(slices.Clone(hostileGroups), "bad\xffutf8"), maxLagRows)
	reg.MustRegister(tc)
	// The names written here are the registry's: no collector can take one.
	if err := reg.Register(prometheus.NewGauge(prometheus.GaugeOpts{Name: "fjord_consumer_group_lag_records", Help: "Again."})); err == nil {
		t.Fatal("a second fjord_consumer_group_lag_records was registered")
	}
	handler := metricsHandler(reg, &tc)
	get := func(header http.Header, query string) (*httptest.ResponseRecorder, []byte) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/metrics"+query, nil)
		for k, v := range header {
			req.Header[k] = v
		}
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			t.Fatalf("GET /metrics%s: %d %s", query, w.Code, w.Body)
		}
		body := w.Body.Bytes()
		if w.Header().Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		return w, body
	}

	w, plain := get(nil, "")
	if ct, want := w.Header().Get("Content-Type"), "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"; ct != want {
		t.Errorf("Content-Type %q, want %q", ct, want)
	}
	if enc := w.Header().Get("Content-Encoding"); enc != "" {
		t.Errorf("Content-Encoding %q unasked", enc)
	}
	// Each family once (the parser refuses a second HELP or TYPE too),
	// in name order.
	var types []string
	for line := range strings.Lines(string(plain)) {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			types = append(types, strings.Fields(name)[0])
		}
	}
	if !slices.IsSorted(types) || len(slices.Compact(slices.Clone(types))) != len(types) {
		t.Errorf("families out of order or repeated: %v", types)
	}
	fams := parseExposition(t, plain)
	if len(types) != len(fams) {
		t.Errorf("%d TYPE lines for %d families", len(types), len(fams))
	}
	for _, name := range []string{"fjord_a_total", "fjord_consumer_group_lag_other", "zz_last", "fjord_consumer_group_lag", "fjord_follower_lag_records", "fjord_consumer_group_records_lost_total"} {
		if fams[name] == nil {
			t.Errorf("no %s in\n%s", name, plain)
		}
	}
	if typ := fams["fjord_consumer_group_records_lost_total"].GetType(); typ != dto.MetricType_COUNTER {
		t.Errorf("records lost is a %v", typ)
	}
	if typ := fams["fjord_consumer_group_lag_records"].GetType(); typ != dto.MetricType_GAUGE {
		t.Errorf("lag records is a %v", typ)
	}
	bad := 0
	for _, m := range fams["fjord_consumer_group_lag_records"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "group" && l.GetValue() == "bad\uFFFDutf8" {
				bad++
			}
		}
	}
	if bad != 6 {
		t.Errorf("the group that is not UTF-8 has %d lag rows, want 6", bad)
	}

	// Prometheus's request: gzip, the same exposition.
	w, inflated := get(http.Header{"Accept-Encoding": {"gzip"}, "Accept": {"application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.4,*/*;q=0.1"}}, "")
	if enc := w.Header().Get("Content-Encoding"); enc != "gzip" {
		t.Errorf("Content-Encoding %q with gzip asked", enc)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("Content-Type %q: the text format is the one served", ct)
	}
	if !bytes.Equal(inflated, plain) {
		t.Errorf("the gzipped exposition differs from the plain one")
	}
	if _, body := get(http.Header{"Accept-Encoding": {"gzip;q=0, identity"}}, ""); !bytes.Equal(body, plain) {
		t.Errorf("gzip;q=0 was not served plain")
	}

	// name[] keeps the families named, of either kind.
	_, filtered := get(nil, "?name[]=fjord_a_total&name[]=fjord_consumer_group_lag_unknown")
	if got := slices.Sorted(func(yield func(string) bool) {
		for name := range parseExposition(t, filtered) {
			yield(name)
		}
	}); !slices.Equal(got, []string{"fjord_a_total", "fjord_consumer_group_lag_unknown"}) {
		t.Errorf("name[] filter served %v", got)
	}

	// A registry without the families written here is served alone.
	other := prometheus.NewRegistry()
	other.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "only", Help: "Alone."}))
	rec := httptest.NewRecorder()
	metricsHandler(other, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if fams := parseExposition(t, rec.Body.Bytes()); len(fams) != 1 || fams["only"] == nil {
		t.Errorf("a registry of its own served %v", fams)
	}
}
