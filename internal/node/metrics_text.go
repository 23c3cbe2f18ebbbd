package node

import (
	"cmp"
	"compress/gzip"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/fjordmq/fjord/internal/grouplag"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
)

// The /metrics handler writes the families whose size grows with the
// partitions (each hosted partition's offsets, each follower's lag, each
// consumer group's lag per partition) itself, in Prometheus's text
// format, version 0.0.4:
//
//	# HELP <name> <help, \ and line feed escaped>
//	# TYPE <name> gauge|counter
//	<name>{<label>="<value, \ " and line feed escaped>",...} <value>
//
// and the rest of the registry (the Go runtime, the process, the Kafka
// and HTTP listeners, fsync, replication, transactions: a few hundred
// series) through client_golang's encoder, as before.
//
// Why not client_golang for these families: issue 18's point 4 wants a
// scrape of a node with 10,000 partitions and 100 groups (about 99,000
// series) under 100 ms, and client_golang's general path costs about
// 3 µs a series: a prometheus.Metric and a dto.Metric each, ~15
// allocations, then Gather sorts every family by label values and checks
// every series' labels for consistency and duplicates, and the encoder
// checks every name for escaping. That was 300 ms (BENCHMARKS.md,
// "Scraping /metrics with consumer lag"). Here the rows are read once
// per scrape, each row's label block is escaped once and shared by
// every family of its rows, and a sample is a name, that block and a
// strconv.Append'ed value appended to a pooled buffer: no per-series
// allocation, sort or check. Fewer series was rejected (each one is
// asked for in issue 18 or mirrors Kafka's broker), and so was emitting
// rows in client_golang's label order to make its sort cheap: the sort
// is a quarter of its cost at most.
//
// What it gives up: these families are served in the text format only,
// whatever a scraper's Accept header prefers (Prometheus accepts it),
// and this file must keep them valid and unique itself. Both are held
// by construction: label values go through appendLabelValue alone,
// names and label names are constants, rows are unique by their labels
// (a log per topic-partition, a lag row per group and partition; but
// see appendLabelValue for group ids that are not UTF-8), and the
// family names are registered with the registry (textCollector's
// Describe), so no other collector can claim one. The tests parse every
// scrape with Prometheus's own parser and compare these families with
// client_golang's for the same rows.
//
// A line reads as client_golang wrote it: label names sorted, integral
// values without exponent (client_golang's 1e+07 is 10000000 here, the
// same float64 to a parser), others as strconv.AppendFloat(v, 'g', -1),
// which is what client_golang writes.

// rowSet names the rows a family has one sample per, and so its labels.
type rowSet int

const (
	// perNode: one sample, no labels.
	perNode rowSet = iota
	// perPartition: each hosted partition (partition, topic).
	perPartition
	// perFollower: each follower of each partition this node leads
	// (follower, partition, topic).
	perFollower
	// perLagRow: each (group, partition) lag row within maxLagRows
	// (group, partition, topic).
	perLagRow
	// perLagSum: each (group, topic) of those rows (group, topic).
	perLagSum
	rowSets
)

// labelNames are each row set's label names, sorted as client_golang
// writes them.
var labelNames = [rowSets][]string{
	perPartition: {"partition", "topic"},
	perFollower:  {"follower", "partition", "topic"},
	perLagRow:    {"group", "partition", "topic"},
	perLagSum:    {"group", "topic"},
}

// textFamily is a family the /metrics handler writes itself.
type textFamily struct {
	name, help string
	counter    bool // else a gauge
	rows       rowSet
	// value is the sample of row i of rows in s (i is 0 for perNode);
	// ok false leaves the row out. A family with no sample is left out
	// whole, as client_golang leaves out an empty one.
	value func(s *textScrape, i int) (v float64, ok bool)
	// header is the HELP and TYPE lines, set in textFamilies.
	header []byte
}

// textFamilies are the families written here, sorted by name: the
// handler merges them into the registry's, which Gather sorts.
var textFamilies = func() []textFamily {
	fams := slices.Concat(partitionFamilies, lagFamilies)
	slices.SortFunc(fams, func(a, b textFamily) int { return strings.Compare(a.name, b.name) })
	helpEscaper := strings.NewReplacer(`\`, `\\`, "\n", `\n`)
	for i := range fams {
		f := &fams[i]
		if i > 0 && f.name == fams[i-1].name {
			panic(fmt.Sprintf("metric family %s defined twice", f.name))
		}
		typ := "gauge"
		if f.counter {
			typ = "counter"
		}
		f.header = fmt.Appendf(nil, "# HELP %s %s\n# TYPE %s %s\n", f.name, helpEscaper.Replace(f.help), f.name, typ)
	}
	return fams
}()

// partitionFigures are one hosted partition's figures, read once per
// scrape.
type partitionFigures struct {
	topic                                         string
	partition                                     int32
	logStart, logEnd, highWatermark, size, lsoLag int64
	retentionMargin                               float64 // seconds; valid when hasMargin
	hasMargin                                     bool
}

// lagSum is a group's lag on a topic: the sum of its rows' records.
type lagSum struct {
	group, topic string
	records      int64
}

// textScrape is what one scrape reads, once, and every family writes
// from. Pooled: its slices are reused from scrape to scrape.
type textScrape struct {
	now        time.Time
	partitions []partitionFigures    // sorted by topic and partition
	followers  []replica.FollowerLag // sorted by topic, partition and follower
	lag        *grouplag.Snapshot    // shared with the refresher: read only
	lagRows    []grouplag.Row        // lag.Rows within the bound
	lagDropped int                   // lag.Rows past the bound
	lagSums    []lagSum              // one per (group, topic) run of lagRows
	labels     [rowSets]labelBlocks  // each row's `{...}`, by row set
	out        []byte                // the response body
}

// labelBlocks are rows' label blocks, `{a="x",b="y"}`, escaped once and
// written by every family of those rows. Row i's is text[ends[i-1]:ends[i]].
// A row is written by one call per label, in names' order, then end.
type labelBlocks struct {
	names []string // labelNames of the row set
	text  []byte
	ends  []int
	next  int // the label of the row being written that comes next
}

func (l *labelBlocks) reset(names []string) {
	l.names, l.text, l.ends, l.next = names, l.text[:0], l.ends[:0], 0
}

// name starts the next label: its separator, name, and opening quote.
func (l *labelBlocks) name() {
	sep := byte(',')
	if l.next == 0 {
		sep = '{'
	}
	l.text = append(append(l.text, sep), l.names[l.next]...)
	l.text = append(l.text, `="`...)
	l.next++
}

func (l *labelBlocks) str(v string) {
	l.name()
	l.text = append(appendLabelValue(l.text, v), '"')
}

func (l *labelBlocks) int(v int32) {
	l.name()
	l.text = append(strconv.AppendInt(l.text, int64(v), 10), '"')
}

// end ends a row, which had a value for each name.
func (l *labelBlocks) end() {
	if l.next != len(l.names) {
		panic(fmt.Sprintf("a row of %d label values for labels %v", l.next, l.names))
	}
	if l.next > 0 {
		l.text = append(l.text, '}')
	}
	l.next = 0
	l.ends = append(l.ends, len(l.text))
}

func (l *labelBlocks) row(i int) []byte {
	start := 0
	if i > 0 {
		start = l.ends[i-1]
	}
	return l.text[start:l.ends[i]]
}

// rowCount is how many rows of set a family of it walks.
func (s *textScrape) rowCount(set rowSet) int {
	switch set {
	case perPartition:
		return len(s.partitions)
	case perFollower:
		return len(s.followers)
	case perLagRow:
		return len(s.lagRows)
	case perLagSum:
		return len(s.lagSums)
	}
	return 1
}

// labelSink takes a row's label values, in labelNames' order.
type labelSink interface {
	str(string)
	int(int32)
}

// rowLabels gives row i of set's label values to l.
func (s *textScrape) rowLabels(set rowSet, i int, l labelSink) {
	switch set {
	case perPartition:
		l.int(s.partitions[i].partition)
		l.str(s.partitions[i].topic)
	case perFollower:
		f := &s.followers[i]
		l.int(f.Follower)
		l.int(f.Partition)
		l.str(f.Topic)
	case perLagRow:
		r := &s.lagRows[i]
		l.str(r.Group)
		l.int(r.Partition)
		l.str(r.Topic)
	case perLagSum:
		l.str(s.lagSums[i].group)
		l.str(s.lagSums[i].topic)
	}
}

// appendRowLabels writes every row's label block.
func (s *textScrape) appendRowLabels() {
	for set := range rowSets {
		l := &s.labels[set]
		l.reset(labelNames[set])
		for i := range s.rowCount(set) {
			s.rowLabels(set, i, l)
			l.end()
		}
	}
}

// appendFamily appends f's HELP and TYPE lines and samples to b, or
// nothing when f has no sample.
func (s *textScrape) appendFamily(b []byte, f *textFamily) []byte {
	start := len(b)
	b = append(b, f.header...)
	samples := 0
	labels := &s.labels[f.rows]
	for i := range s.rowCount(f.rows) {
		v, ok := f.value(s, i)
		if !ok {
			continue
		}
		b = append(b, f.name...)
		b = append(b, labels.row(i)...)
		b = append(b, ' ')
		b = appendSampleValue(b, v)
		b = append(b, '\n')
		samples++
	}
	if samples == 0 {
		return b[:start]
	}
	return b
}

// appendLabelValue appends v as the inside of a quoted label value:
// backslash, double quote and line feed escaped as \\, \" and \n, as the
// text format requires (a group id may hold any of them).
//
// Each byte that is not part of valid UTF-8 becomes U+FFFD. The format
// and Prometheus want UTF-8 (its parser refuses the whole scrape over
// one bad label value, and client_golang's MustNewConstMetric panics on
// one, which in Gather's goroutine ended the process), and a Kafka
// group id is bytes the protocol calls a string: Kafka's own broker
// decodes it as UTF-8 the same way, so two ids that differ only in
// invalid bytes are one group there, and one series here (Prometheus
// drops the second sample of a series in one scrape, counting it in
// prometheus_target_scrapes_sample_duplicate_timestamp_total when the
// values differ; the scrape stands). One U+FFFD per byte rather than
// per run keeps more of them apart.
func appendLabelValue(b []byte, v string) []byte {
	start := 0 // v[start:i] is yet to be copied
	for i := 0; i < len(v); {
		c := v[i]
		if c < utf8.RuneSelf {
			var escaped string
			switch c {
			case '\\':
				escaped = `\\`
			case '"':
				escaped = `\"`
			case '\n':
				escaped = `\n`
			default:
				i++
				continue
			}
			b = append(append(b, v[start:i]...), escaped...)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, v[start:i]...), "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(b, v[start:]...)
}

// appendSampleValue appends v: an integer exactly (below 2^53 every
// float64 integer is one int64), the rest as client_golang writes them.
func appendSampleValue(b []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(b, "NaN"...)
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}

// textCollector reads, at each scrape, the rows of the families written
// here. It is registered in the node's registry for its Describe alone:
// that reserves the family names; its Collect sends nothing, so Gather
// never builds a dto.Metric for them. metricsHandler writes them.
type textCollector struct {
	// Each source is called once per scrape; a nil one has no rows.
	logs      func() map[storage.TopicPartition]*storage.Log
	followers func(visit func(replica.FollowerLag))
	lag       func() *grouplag.Snapshot
	// maxLagRows bounds the lag rows written (maxLagRows in lag.go);
	// those past it are counted in fjord_consumer_group_lag_series_dropped.
	maxLagRows int
}

func (textCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range textFamilies {
		ch <- prometheus.NewDesc(f.name, f.help, labelNames[f.rows], nil)
	}
}

func (textCollector) Collect(chan<- prometheus.Metric) {}

var emptySnapshot = &grouplag.Snapshot{}

// read fills s with the rows of this scrape, at now.
func (c textCollector) read(s *textScrape, now time.Time) {
	s.now = now
	s.partitions = s.partitions[:0]
	if c.logs != nil {
		nowMs := now.UnixMilli()
		for tp, l := range c.logs() {
			// The last stable offset before the high watermark: one that
			// moves on between the two reads makes the difference larger
			// for a moment, never negative (the LSO is at most the HW).
			lso := l.LastStableOffset()
			p := partitionFigures{
				topic: tp.Topic, partition: tp.Partition,
				logStart: l.LogStartOffset(), logEnd: l.LogEndOffset(), highWatermark: l.HighWatermark(), size: l.Size(),
			}
			p.lsoLag = p.highWatermark - lso
			if deadline, ok, err := l.RetentionDeadline(); err == nil && ok {
				p.retentionMargin, p.hasMargin = float64(max(deadline-nowMs, 0))/1000, true
			}
			s.partitions = append(s.partitions, p)
		}
		slices.SortFunc(s.partitions, func(a, b partitionFigures) int {
			return cmp.Or(strings.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition))
		})
	}
	s.followers = s.followers[:0]
	if c.followers != nil {
		c.followers(func(l replica.FollowerLag) { s.followers = append(s.followers, l) })
		slices.SortFunc(s.followers, func(a, b replica.FollowerLag) int {
			return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Follower, b.Follower))
		})
	}
	s.lag = emptySnapshot
	if c.lag != nil {
		s.lag = c.lag()
	}
	rows := s.lag.Rows
	s.lagDropped = max(len(rows)-c.maxLagRows, 0)
	s.lagRows = rows[:len(rows)-s.lagDropped]
	// Rows are sorted by group and topic, so each (group, topic) sum is
	// a run.
	s.lagSums = s.lagSums[:0]
	for i, r := range s.lagRows {
		if i == 0 || r.Group != s.lagRows[i-1].Group || r.Topic != s.lagRows[i-1].Topic {
			s.lagSums = append(s.lagSums, lagSum{group: r.Group, topic: r.Topic})
		}
		s.lagSums[len(s.lagSums)-1].records += r.Records
	}
	s.appendRowLabels()
}

// appendBuffer is an io.Writer (and expfmt's faster string, byte and
// rune writer) appending to b.
type appendBuffer struct{ b []byte }

func (a *appendBuffer) Write(p []byte) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

func (a *appendBuffer) WriteString(p string) (int, error) {
	a.b = append(a.b, p...)
	return len(p), nil
}

func (a *appendBuffer) WriteByte(c byte) error {
	a.b = append(a.b, c)
	return nil
}

func (a *appendBuffer) WriteRune(r rune) (int, error) {
	n := len(a.b)
	a.b = utf8.AppendRune(a.b, r)
	return len(a.b) - n, nil
}

var (
	textScrapes = sync.Pool{New: func() any { return new(textScrape) }}
	// gzip's fastest level, not promhttp's default (6): a 10,000
	// partition scrape's 7.8 MB compress to 364 KB rather than 317 KB,
	// in about 10 ms rather than 70 (BENCHMARKS.md): the default alone
	// would take most of the 100 ms a scrape may.
	gzipWriters = sync.Pool{New: func() any {
		w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
		return w
	}}
)

// metricsServer serves /metrics: the registry's families through
// client_golang's text encoder, the text collector's written here, as
// one exposition sorted by family name, as promhttp sorts it.
type metricsServer struct {
	reg  *prometheus.Registry
	text textCollector
	fams []textFamily // textFamilies, or none when reg has no textCollector
	// lastSize is the last body's length: a new buffer starts that
	// large rather than doubling its way there.
	lastSize atomic.Int64
}

// metricsHandler serves reg and text's families (text is registered in
// reg, for its names; nil: reg alone).
func metricsHandler(reg *prometheus.Registry, text *textCollector) http.Handler {
	h := &metricsServer{reg: reg}
	if text != nil {
		h.text, h.fams = *text, textFamilies
	}
	return h
}

func (h *metricsServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mfs, err := h.reg.Gather()
	if err != nil {
		// promhttp's default (HTTPErrorOnError): a scrape that cannot
		// be whole is refused, not served in part.
		http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
		return
	}
	// The text format whatever the Accept header prefers (see the top
	// of this file), with the name escaping it asks for, as promhttp
	// answers: every name here is a legacy one, unchanged by any.
	format := expfmt.NegotiateAccept(r.Header, expfmt.NewFormat(expfmt.TypeTextPlain))
	var only map[string]bool // promhttp's name[] filter
	if names := r.URL.Query()["name[]"]; len(names) > 0 {
		only = map[string]bool{}
		for _, n := range names {
			only[n] = true
		}
	}
	s := textScrapes.Get().(*textScrape)
	defer func() {
		s.lag, s.lagRows = nil, nil // the refresher's: not kept past the scrape
		textScrapes.Put(s)
	}()
	if last := int(h.lastSize.Load()); cap(s.out) < last {
		s.out = make([]byte, 0, last+last/8)
	}
	h.text.read(s, time.Now())
	body, err := s.appendExposition(s.out[:0], mfs, h.fams, format, only)
	s.out = body
	if err != nil {
		http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
		return
	}
	h.lastSize.Store(int64(len(body)))

	header := w.Header()
	header.Set("Content-Type", string(format))
	header.Add("Vary", "Accept-Encoding")
	if !acceptsGzip(r) {
		header.Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body) // a scraper gone is its own concern, as in promhttp
		return
	}
	header.Set("Content-Encoding", "gzip")
	gz := gzipWriters.Get().(*gzip.Writer)
	gz.Reset(w)
	gz.Write(body)
	gz.Close()
	gzipWriters.Put(gz)
}

// appendExposition appends to b the registry's families mfs (sorted by
// name, as Gather returns them) and fams (textFamilies, or none), merged
// by name, those in only when it is not nil. Each family appears once:
// the registry holds textFamilies' names (textCollector's Describe), and
// its Collect sends nothing.
func (s *textScrape) appendExposition(b []byte, mfs []*dto.MetricFamily, fams []textFamily, format expfmt.Format, only map[string]bool) ([]byte, error) {
	out := appendBuffer{b}
	enc := expfmt.NewEncoder(&out, format)
	i := 0
	for _, mf := range mfs {
		for ; i < len(fams) && fams[i].name <= mf.GetName(); i++ {
			if fams[i].name == mf.GetName() {
				return out.b, fmt.Errorf("metric family %s is both written here and in the registry", mf.GetName())
			}
			if only == nil || only[fams[i].name] {
				out.b = s.appendFamily(out.b, &fams[i])
			}
		}
		if only == nil || only[mf.GetName()] {
			if err := enc.Encode(mf); err != nil {
				return out.b, err
			}
		}
	}
	for ; i < len(fams); i++ {
		if only == nil || only[fams[i].name] {
			out.b = s.appendFamily(out.b, &fams[i])
		}
	}
	return out.b, nil
}

// acceptsGzip says whether r's Accept-Encoding names gzip with a
// non-zero quality, as Prometheus sends it. (promhttp's negotiation
// also weighs identity against gzip by quality; no scraper asks for
// both with different weights.)
func acceptsGzip(r *http.Request) bool {
	for _, field := range r.Header.Values("Accept-Encoding") {
		for coding := range strings.SplitSeq(field, ",") {
			name, params, _ := strings.Cut(coding, ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q, found := strings.CutPrefix(strings.TrimSpace(params), "q=")
			if !found {
				return true
			}
			if v, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err != nil || v > 0 {
				return true
			}
		}
	}
	return false
}
