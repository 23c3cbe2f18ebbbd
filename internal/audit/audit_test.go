package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/testutil"
)

var t0 = time.Date(2025, 3, 4, 5, 6, 7, 890_123_456, time.UTC)

// open opens a Log in a test directory with cfg and a fake clock at t0,
// closed at the end of the test.
func open(t *testing.T, cfg Config) (*Log, *clock.Fake, string) {
	t.Helper()
	fc := clock.NewFake(t0)
	if cfg.Now == nil {
		cfg.Now = fc.Now
	}
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := Open(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, fc, path
}

// readLines parses every line of path as a JSON object; a line that does
// not parse fails the test.
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("line %d of %s does not parse: %v: %q", len(out)+1, path, err, sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		t.Errorf("%s does not end in a newline", path)
	}
	return out
}

// count returns the events of lines by principal, and the sum of the
// dropped lines' counts.
func count(lines []map[string]any) (byPrincipal map[string]int, dropped int) {
	byPrincipal = map[string]int{}
	for _, m := range lines {
		if m["event"] == kindDropped {
			dropped += int(m["count"].(float64))
			continue
		}
		p, _ := m["principal"].(string)
		byPrincipal[p]++
	}
	return byPrincipal, dropped
}

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

var timeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

// A line carries every field of its event under Event's JSON names,
// leaves out the empty ones, and has its time in UTC with milliseconds.
func TestLogLine(t *testing.T) {
	l, _, path := open(t, Config{})
	l.Record(Event{
		Time: t0.In(time.FixedZone("CET", 3600)), Kind: KindAuthorization, Result: ResultDenied,
		Principal: "User:alice", Client: "10.0.0.8:40022", Listener: "SASL_SSL", Mechanism: "SCRAM-SHA-512",
		API: "Produce", Operation: "WRITE", ResourceType: "TOPIC", Resource: "orders", Rule: "no ACL allows it", Reason: "r",
	})
	l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Client: "10.0.0.9:1"}) // no time: the clock's
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %v", len(lines), lines)
	}
	want := map[string]any{
		"time": "2025-03-04T05:06:07.890Z", "event": "authorization", "result": "denied",
		"principal": "User:alice", "client": "10.0.0.8:40022", "listener": "SASL_SSL", "mechanism": "SCRAM-SHA-512",
		"api": "Produce", "operation": "WRITE", "resource_type": "TOPIC", "resource": "orders", "rule": "no ACL allows it", "reason": "r",
	}
	if fmt.Sprint(lines[0]) != fmt.Sprint(want) {
		t.Errorf("line\n%v\nwant\n%v", lines[0], want)
	}
	want = map[string]any{"time": "2025-03-04T05:06:07.890Z", "event": "authentication", "result": "failure", "client": "10.0.0.9:1"}
	if fmt.Sprint(lines[1]) != fmt.Sprint(want) {
		t.Errorf("line\n%v\nwant\n%v", lines[1], want)
	}
	for _, m := range lines {
		if !timeRE.MatchString(m["time"].(string)) {
			t.Errorf("time %q is not UTC RFC 3339 with ms", m["time"])
		}
	}
	if n := counter(t, l.written); n != 2 {
		t.Errorf("written counter %v, want 2", n)
	}
}

// One principal flooding from one host is held to its own rate; another
// principal, and the same principal from another host, still get
// through, and the flood's excess is counted in a dropped line.
func TestLogClientLimit(t *testing.T) {
	l, fc, path := open(t, Config{ClientRate: 50, ClientBurst: 100})
	for range 1000 {
		l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:mallory", Client: "10.0.0.1:5000"})
	}
	for i := range 10 {
		l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:alice", Client: fmt.Sprintf("10.0.0.1:%d", 6000+i)})
		l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:mallory", Client: "10.0.0.2:5000"})
	}
	fc.Advance(time.Second) // 50 more for mallory at 10.0.0.1
	for range 100 {
		l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:mallory", Client: "10.0.0.1:5001"})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	by, dropped := count(readLines(t, path))
	if by["User:alice"] != 10 {
		t.Errorf("alice: %d events written, want all 10", by["User:alice"])
	}
	if want := 100 + 10 + 50; by["User:mallory"] != want {
		t.Errorf("mallory: %d events written, want %d (burst 100 and 50 a second from one host, 10 from another)", by["User:mallory"], want)
	}
	if want := 900 + 50; dropped != want {
		t.Errorf("dropped lines count %d, want %d", dropped, want)
	}
	if n := counter(t, l.dropped[dropRateLimitClient]); n != 950 {
		t.Errorf("rate_limit_client counter %v, want 950", n)
	}
}

// Failed authentications are limited by host whatever user name each
// claims: an attacker trying a new name each time gets no new bucket.
func TestLogFailedAuthenticationLimitedByHost(t *testing.T) {
	l, _, path := open(t, Config{ClientRate: 1, ClientBurst: 5})
	for i := range 50 {
		l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Principal: fmt.Sprintf("User:guess%d", i), Client: "10.0.0.1:5000"})
	}
	l.Record(Event{Kind: KindAuthentication, Result: ResultSuccess, Principal: "User:alice", Client: "10.0.0.1:5001"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	by, dropped := count(readLines(t, path))
	if len(by) != 6 || by["User:alice"] != 1 || dropped != 45 {
		t.Errorf("written %v, dropped %d; want 5 guesses, alice's success, 45 dropped", by, dropped)
	}
}

// The log's own limit bounds the total when every event has its own
// key: denials alone get three quarters of it (the failures' reserve
// kept), burst 15 then 7.5 a second.
func TestLogGlobalLimit(t *testing.T) {
	l, fc, path := open(t, Config{Rate: 10, Burst: 20})
	record := func(n int) {
		for i := range n {
			l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: fmt.Sprintf("User:u%d", i), Client: "10.0.0.1:1"})
		}
	}
	record(100)
	fc.Advance(2 * time.Second)
	record(100)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	by, dropped := count(lines)
	total := 0
	for _, n := range by {
		total += n
	}
	if total != 30 || dropped != 170 {
		t.Errorf("%d written and %d dropped, want 15+15 written (3/4 of burst 20, then 2 s at 3/4 of 10/s) and 170 dropped", total, dropped)
	}
	if n := counter(t, l.dropped[dropRateLimit]); n != 170 {
		t.Errorf("rate_limit counter %v, want 170", n)
	}
}

// droppedLines returns the dropped lines of path.
func droppedLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, m := range readLines(t, path) {
		if m["event"] == kindDropped {
			out = append(out, m)
		}
	}
	return out
}

// A flood of failed logins from many IPv6 addresses of one /64 is one
// client's: held to one bucket, while another /64 and an IPv4 host
// still get through, and the dropped line names the /64.
func TestLogIPv6Slash64IsOneClient(t *testing.T) {
	l, _, path := open(t, Config{ClientRate: 1, ClientBurst: 100})
	for i := range 1000 {
		l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Principal: fmt.Sprintf("User:guess%d", i),
			Client: fmt.Sprintf("[2001:db8:1:2:%x:%x::1]:%d", i/7, i, 40000+i)})
	}
	l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Principal: "User:other64", Client: "[2001:db8:1:3::1]:5000"})
	l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Principal: "User:v4", Client: "10.0.0.1:5000"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	by, dropped := count(readLines(t, path))
	if len(by) != 102 || by["User:other64"] != 1 || by["User:v4"] != 1 || dropped != 900 {
		t.Errorf("%d principals written (other /64: %d, IPv4: %d), %d dropped; want 100 guesses, the other two, 900 dropped",
			len(by), by["User:other64"], by["User:v4"], dropped)
	}
	lines := droppedLines(t, path)
	if len(lines) != 1 {
		t.Fatalf("dropped lines %v, want one", lines)
	}
	want := `[map[count:900 host:2001:db8:1:2::/64]]`
	if got := fmt.Sprint(lines[0]["top"]); got != want {
		t.Errorf("dropped line's top %s, want %s", got, want)
	}
}

// Successes have their own budget: a flood of them from many principals
// does not stop the failures and denials after it from being written.
func TestLogSuccessFloodKeepsDenials(t *testing.T) {
	l, _, path := open(t, Config{Rate: 10, Burst: 10})
	for i := range 1000 {
		l.Record(Event{Kind: KindAuthentication, Result: ResultSuccess, Principal: fmt.Sprintf("User:busy%d", i), Client: "10.0.0.1:5000"})
	}
	l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:mallory", Client: "10.0.0.2:5000", Resource: "payroll"})
	l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Principal: "User:root", Client: "10.0.0.3:5000"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	by, dropped := count(readLines(t, path))
	if by["User:mallory"] != 1 || by["User:root"] != 1 || len(by) != 12 || dropped != 990 {
		t.Errorf("%d principals written (denial: %d, failure: %d), %d dropped; want 10 successes, the denial, the failure, 990 dropped",
			len(by), by["User:mallory"], by["User:root"], dropped)
	}
}

// Failed logins from more hosts than the per-host buckets can hold back
// take the failures' reserve and the shared half, not the denials'
// reserve: a denial is still written.
func TestLogFailedLoginFloodKeepsDenialReserve(t *testing.T) {
	l, _, path := open(t, Config{Rate: 100, Burst: 100, ClientRate: 1, ClientBurst: 50})
	for h := range 40 { // 40 hosts at their full burst: 2,000 against a budget of 100
		for range 50 {
			l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Client: fmt.Sprintf("10.0.1.%d:5000", h)})
		}
	}
	l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:mallory", Client: "10.0.0.2:5000"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	by, dropped := count(readLines(t, path))
	if by[""] != 75 || by["User:mallory"] != 1 || dropped != 2000-75 {
		t.Errorf("written %v, %d dropped; want 75 failed logins (3/4 of 100), the denial, %d dropped", by, dropped, 2000-75)
	}
}

// The dropped line names the keys that dropped the most, most first,
// even when the flooder hides among more keys than droppers counts.
func TestLogDroppedLineNamesFlooders(t *testing.T) {
	l, _, path := open(t, Config{ClientRate: 1, ClientBurst: 1})
	denial := func(principal, client string) {
		l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: principal, Client: client})
	}
	// Each key's first event is written (burst 1), the rest dropped: 40
	// decoys drop one each before the flooder's 300, and a /64's failed
	// logins 5 after it.
	guess := func(i int) {
		l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Principal: "User:guess", Client: fmt.Sprintf("[2001:db8::%d]:1", i)})
	}
	for i := range 40 {
		denial(fmt.Sprintf("User:decoy%d", i), fmt.Sprintf("10.0.2.%d:1", i))
	}
	denial("User:mallory", "10.0.0.66:999")
	guess(0)
	for i := range 40 {
		denial(fmt.Sprintf("User:decoy%d", i), fmt.Sprintf("10.0.2.%d:2", i))
	}
	for i := range 300 {
		denial("User:mallory", fmt.Sprintf("10.0.0.66:%d", 1000+i))
	}
	for i := range 5 {
		guess(i + 1)
	}
	denial("User:alice", "10.0.0.1:1") // written, after the dropped line
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	var dl map[string]any
	for i, m := range lines {
		if m["event"] == kindDropped {
			dl = m
			if i+1 >= len(lines) || lines[i+1]["principal"] != "User:alice" {
				t.Errorf("the dropped line is not followed by alice's denial")
			}
		}
	}
	if dl == nil {
		t.Fatal("no dropped line")
	}
	if dl["count"] != float64(40+300+5) {
		t.Errorf("dropped line counts %v, want %d", dl["count"], 40+300+5)
	}
	top, _ := dl["top"].([]any)
	if len(top) != 3 {
		t.Fatalf("top %v, want three keys", dl["top"])
	}
	want := []string{"map[count:300 host:10.0.0.66 principal:User:mallory]", "map[count:5 host:2001:db8::/64]"}
	for i, w := range want {
		if got := fmt.Sprint(top[i]); got != w {
			t.Errorf("top[%d] = %s, want %s", i, got, w)
		}
	}
}

// When writing resumes after drops, one dropped line comes first with
// their count and the time of the first; drops after the last event are
// counted at Close.
func TestLogDroppedLine(t *testing.T) {
	l, fc, path := open(t, Config{ClientRate: 1, ClientBurst: 1})
	ev := Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:a", Client: "h:1"}
	l.Record(ev) // written
	fc.Advance(100 * time.Millisecond)
	l.Record(ev) // dropped: the first
	fc.Advance(100 * time.Millisecond)
	l.Record(ev) // dropped
	fc.Advance(time.Second)
	l.Record(ev) // written, after a dropped line of 2
	l.Record(ev) // dropped, counted at Close
	fc.Advance(time.Second)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	var got []string
	for _, m := range lines {
		s := m["event"].(string) + "@" + m["time"].(string)
		if m["event"] == kindDropped {
			s += fmt.Sprintf(" count=%v since=%v", m["count"], m["since"])
		}
		got = append(got, s)
	}
	want := []string{
		"authorization@2025-03-04T05:06:07.890Z",
		"dropped@2025-03-04T05:06:09.090Z count=2 since=2025-03-04T05:06:07.990Z",
		"authorization@2025-03-04T05:06:09.090Z",
		"dropped@2025-03-04T05:06:10.090Z count=1 since=2025-03-04T05:06:09.090Z",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// An event that finds the queue full is dropped, not waited for, and
// counted.
func TestLogQueueFull(t *testing.T) {
	l, _, path := open(t, Config{QueueLength: 2})
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l.testHookWrite = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	ev := func(i int) Event {
		return Event{Kind: KindAuthorization, Result: ResultDenied, Principal: fmt.Sprintf("User:u%d", i)}
	}
	l.Record(ev(0))
	<-entered // the writer holds event 0 and waits
	for i := 1; i <= 5; i++ {
		l.Record(ev(i)) // 1 and 2 fill the queue; 3, 4, 5 are dropped
	}
	close(release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	by, dropped := count(readLines(t, path))
	if len(by) != 3 || by["User:u0"] != 1 || by["User:u1"] != 1 || by["User:u2"] != 1 || dropped != 3 {
		t.Errorf("written %v, dropped %d; want u0, u1, u2 and 3 dropped", by, dropped)
	}
	if n := counter(t, l.dropped[dropQueueFull]); n != 3 {
		t.Errorf("queue_full counter %v, want 3", n)
	}
}

// The file is rotated before a line would take it past MaxBytes, the
// last rotation replacing path.1: the two files hold at most 2*MaxBytes,
// every line parses, and the newest lines are kept in order.
func TestLogRotation(t *testing.T) {
	const maxBytes = MinMaxBytes
	l, _, path := open(t, Config{MaxBytes: maxBytes, Rate: 1e6, Burst: 1e6})
	const events = 1000 // about 700 bytes each: some 10 files' worth
	pad := strings.Repeat("x", 500)
	for i := range events {
		l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: fmt.Sprintf("User:u%d", i), Resource: pad, Rule: fmt.Sprint(i)})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var seqs []int
	total := int64(0)
	for _, p := range []string{path + ".1", path} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > maxBytes {
			t.Errorf("%s is %d bytes, more than MaxBytes %d", p, fi.Size(), maxBytes)
		}
		total += fi.Size()
		for _, m := range readLines(t, p) {
			var n int
			fmt.Sscan(m["rule"].(string), &n)
			seqs = append(seqs, n)
		}
	}
	if total > 2*maxBytes {
		t.Errorf("the log holds %d bytes, more than 2*MaxBytes", total)
	}
	if files, _ := filepath.Glob(path + "*"); len(files) != 2 {
		t.Errorf("files %v, want the log and one rotated file", files)
	}
	if len(seqs) < 100 || seqs[len(seqs)-1] != events-1 {
		t.Fatalf("kept %d events ending with %v, want the newest ones ending with %d", len(seqs), seqs[len(seqs)-1:], events-1)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] != seqs[i-1]+1 {
			t.Fatalf("event %d follows %d across the kept files", seqs[i], seqs[i-1])
		}
	}
}

// A file already past MaxBytes when opened is rotated at the first
// line, and appended to when it is not.
func TestLogOpenExisting(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	old := append(bytes.Repeat([]byte("#"), MinMaxBytes), '\n')
	if err := os.WriteFile(path, old, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := Open(path, Config{MaxBytes: MinMaxBytes})
	if err != nil {
		t.Fatal(err)
	}
	l.Record(Event{Kind: KindAuthentication, Result: ResultSuccess, Principal: "User:a"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path + ".1"); !bytes.Equal(got, old) {
		t.Errorf("the oversized file was not rotated whole to .1 (%d bytes there)", len(got))
	}
	if lines := readLines(t, path); len(lines) != 1 {
		t.Errorf("%d lines in the new file, want 1", len(lines))
	}

	l, err = Open(path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.Record(Event{Kind: KindAuthentication, Result: ResultSuccess, Principal: "User:b"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if by, _ := count(readLines(t, path)); by["User:a"] != 1 || by["User:b"] != 1 {
		t.Errorf("reopened log holds %v, want a's line kept and b's appended", by)
	}
}

// Client-chosen strings cannot break a line or the JSON: newlines,
// quotes, control characters, invalid UTF-8, JSON of their own, and a
// megabyte each, which is cut to MaxFieldBytes.
func TestLogHostileFields(t *testing.T) {
	l, _, path := open(t, Config{})
	huge := strings.Repeat("é", 1<<19) // 1 MiB of two-byte runes
	hostile := []string{
		"a\nb", "a\r\n{\"event\":\"authentication\",\"result\":\"success\"}", `"quoted" \ back\slash`,
		"nul\x00bell\x07esc\x1b", "bad utf-8 \xff\xfe\xc3", "line sep \u2028 para \u2029", "</script><b>",
		huge, strings.Repeat("\x01", 1<<20), strings.Repeat("\xff", 1<<20),
	}
	for i, s := range hostile {
		l.Record(Event{Kind: KindAuthentication, Result: ResultFailure, Principal: s, Client: s, Listener: s, Mechanism: s,
			API: s, Operation: s, ResourceType: s, Resource: s, Rule: s, Reason: fmt.Sprint(i) + s})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > len(hostile)*maxLineBytes {
		t.Errorf("%d bytes for %d events, more than %d a line", len(data), len(hostile), maxLineBytes)
	}
	lines := readLines(t, path)
	if len(lines) != len(hostile) {
		t.Fatalf("%d lines for %d events", len(lines), len(hostile))
	}
	for i, m := range lines {
		if m["event"] != KindAuthentication || m["result"] != ResultFailure {
			t.Errorf("line %d: event %v result %v, want the recorded ones", i, m["event"], m["result"])
		}
		for _, k := range []string{"principal", "client", "resource", "reason"} {
			s := m[k].(string)
			if !utf8.ValidString(s) {
				t.Errorf("line %d: %s is not UTF-8 after decoding", i, k)
			}
			if len(s) > 3*(MaxFieldBytes+3) { // U+FFFD is 3 bytes for each invalid byte
				t.Errorf("line %d: %s is %d bytes", i, k, len(s))
			}
		}
	}
	if p := lines[0]["principal"]; p != "a\nb" {
		t.Errorf("a newline did not round-trip: %q", p)
	}
	if p := lines[7]["principal"].(string); p != strings.Repeat("é", MaxFieldBytes/2)+"..." {
		t.Errorf("a megabyte of é was cut to %d bytes: %q...", len(p), p[:min(len(p), 20)])
	}
}

// cut keeps short strings, cuts long ones at a rune's start, and copies
// what it keeps.
func TestCut(t *testing.T) {
	short := strings.Repeat("a", MaxFieldBytes)
	if cut(short) != short {
		t.Error("a string of MaxFieldBytes was cut")
	}
	long := strings.Repeat("a", MaxFieldBytes-1) + "€€" // the € straddles the bound
	if got := cut(long); got != strings.Repeat("a", MaxFieldBytes-1)+"..." {
		t.Errorf("cut at a rune: %q", got[MaxFieldBytes-4:])
	}
	bad := strings.Repeat("\x80", 2*MaxFieldBytes) // no rune start anywhere
	if got := cut(bad); len(got) > MaxFieldBytes+3 {
		t.Errorf("continuation bytes cut to %d bytes", len(got))
	}
}

// Close writes everything recorded before it, returns, and leaves
// Record harmless; a second Close returns the same.
func TestLogCloseFlushes(t *testing.T) {
	l, _, path := open(t, Config{Rate: 1e6, Burst: 1e6, ClientRate: 1e6, ClientBurst: 1e6})
	const n = 3000
	for i := range n {
		l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:a", Rule: fmt.Sprint(i)})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:late"})
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	by, dropped := count(readLines(t, path))
	if by["User:a"] != n || dropped != 0 || by["User:late"] != 0 {
		t.Errorf("written %v, dropped %d; want all %d and nothing after Close", by, dropped, n)
	}
}

// Many goroutines record at once (run with -race): every event is
// either written or counted as dropped, and every line parses.
func TestLogConcurrentRecord(t *testing.T) {
	l, _, path := open(t, Config{Now: time.Now, Rate: 5000, Burst: 2000, ClientRate: 1000, ClientBurst: 300, QueueLength: 64})
	const goroutines, each = 16, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: fmt.Sprintf("User:g%d", g), Client: "10.0.0.1:1", Rule: fmt.Sprint(i)})
			}
		})
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	by, dropped := count(readLines(t, path))
	written := 0
	for _, n := range by {
		written += n
	}
	if written+dropped != goroutines*each {
		t.Errorf("%d written + %d dropped != %d recorded", written, dropped, goroutines*each)
	}
	var countedDrops float64
	for r := range l.dropped {
		countedDrops += counter(t, l.dropped[r])
	}
	if counter(t, l.written) != float64(written) || countedDrops != float64(dropped) {
		t.Errorf("counters: %v written, %v dropped; lines: %d, %d", counter(t, l.written), countedDrops, written, dropped)
	}
}

// A failed write loses its events and the drops its dropped line
// carried; the next dropped line, once writing works again, counts them
// all since the first.
func TestLogWriteFailure(t *testing.T) {
	l, fc, path := open(t, Config{ClientRate: 1, ClientBurst: 1})
	ro, err := os.Open(path) // writes through it fail
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	good, calls := l.f, 0
	l.testHookWrite = func() {
		calls++
		switch calls {
		case 2:
			l.f = ro
		case 3:
			l.f = good
		}
	}
	ev := Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:a"}
	l.Record(ev) // write 1: written
	eventually(t, func() bool { return counter(t, l.written) == 1 })
	fc.Advance(100 * time.Millisecond)
	l.Record(ev) // dropped by the rate limit, since 07.990
	l.Record(ev) // dropped
	fc.Advance(time.Second)
	l.Record(ev) // write 2, with a dropped line of 2: fails
	eventually(t, func() bool { return counter(t, l.dropped[dropWriteError]) == 1 })
	fc.Advance(time.Second)
	l.Record(Event{Kind: KindAuthorization, Result: ResultDenied, Principal: "User:kept"}) // write 3
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	if len(lines) != 3 || lines[0]["principal"] != "User:a" ||
		lines[1]["event"] != kindDropped || lines[1]["count"] != 3.0 || lines[1]["since"] != "2025-03-04T05:06:07.990Z" ||
		lines[2]["principal"] != "User:kept" {
		t.Errorf("lines %v, want a's first event, a dropped line of 3 since the first drop, then kept's event", lines)
	}
	if n := counter(t, l.written); n != 2 {
		t.Errorf("written counter %v, want 2", n)
	}
}

// eventually waits (at most 5 s) for cond (testutil.Eventually).
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// Open refuses what it cannot write and settings it cannot honour.
func TestOpenRefuses(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "a.log")
	for _, tc := range []struct {
		name       string
		path       string
		cfg        Config
		wantConfig bool
	}{
		{"missing directory", filepath.Join(dir, "no", "such", "audit.log"), Config{}, false},
		{"a directory", dir, Config{}, false},
		{"a fifo", fifo, Config{}, false},
		{"max bytes too small", good, Config{MaxBytes: MinMaxBytes - 1}, true},
		{"negative max bytes", good, Config{MaxBytes: -1}, true},
		{"negative rate", good, Config{Rate: -1}, true},
		{"NaN rate", good, Config{ClientRate: math.NaN()}, true},
		{"infinite rate", good, Config{Rate: math.Inf(1)}, true},
		{"negative burst", good, Config{ClientBurst: -1}, true},
		{"negative queue", good, Config{QueueLength: -5}, true},
	} {
		l, err := Open(tc.path, tc.cfg)
		if err == nil {
			l.Close()
			t.Errorf("%s: opened", tc.name)
			continue
		}
		if errors.Is(err, ErrInvalidConfig) != tc.wantConfig {
			t.Errorf("%s: %v (config error: %v)", tc.name, err, tc.wantConfig)
		}
	}
	if _, err := os.Stat(good); !errors.Is(err, os.ErrNotExist) {
		t.Error("a refused config created its file")
	}
}

// Log is a prometheus.Collector of its counters.
func TestLogMetrics(t *testing.T) {
	l, _, _ := open(t, Config{})
	reg := prometheus.NewRegistry()
	if err := reg.Register(l); err != nil {
		t.Fatal(err)
	}
	l.Record(Event{Kind: KindAuthentication, Result: ResultSuccess, Principal: "User:a"})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			name := f.GetName()
			for _, lp := range m.GetLabel() {
				name += "/" + lp.GetValue()
			}
			got[name] = m.GetCounter().GetValue()
		}
	}
	if got["fjord_audit_events_written_total"] != 1 || len(got) != 1+numDropReasons {
		t.Errorf("metrics %v, want written 1 and a dropped series per reason", got)
	}
}
