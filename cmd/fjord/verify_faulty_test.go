package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/faultproxy"
	"github.com/fjordmq/fjord/internal/history"
)

// Acceptance point 2: fjord verify against a broker made faulty on
// purpose (the shared node behind faultproxy) finds each fault and names
// it, with the seed. The same proxy doing nothing wrong passes, so what
// fails is the fault and not the proxy. Each fault is done to one batch,
// and the report must name that batch's offset, not just any violation.
func TestVerifyFindsAFaultyBroker(t *testing.T) {
	want := map[faultproxy.Fault]string{
		faultproxy.Drop:      history.KindLost,
		faultproxy.Duplicate: history.KindDuplicate,
		faultproxy.Reorder:   history.KindMoved,
		faultproxy.Vanish:    history.KindUnstableRead,
	}
	for i, fault := range faultproxy.Faults {
		t.Run(string(fault), func(t *testing.T) {
			seed := uint64(1600 + i)
			topic := fmt.Sprintf("fjord-verify-%d", seed)
			after := int64(20 + seed%40)
			p, err := faultproxy.Start(faultproxy.Config{Upstream: brokers(t), Topic: topic, Fault: fault, After: after, Reader: "fjord-verify-reader"})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			r := fjord(t, "", "verify", "--brokers", p.Addr(), "--seed", fmt.Sprint(seed), "--duration", "5s", "--rate", "300",
				"--partitions", "1", "--group-members", "0", "--report-dir", t.TempDir(), "-o", "json")
			var rep verifyReport
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
			}
			if errs := p.Errors(); len(errs) > 0 {
				t.Fatalf("the proxy failed: %q", errs)
			}
			if fault == faultproxy.None {
				if r.code != 0 || !rep.Pass || rep.Acked < 1000 || rep.Read != rep.Acked+rep.Unacked {
					t.Fatalf("through a proxy that does nothing wrong: exit %d, %+v\nstderr:\n%s", r.code, rep, r.stderr)
				}
				return
			}
			defer ok(t, "", "topic", "delete", topic) // a failed run keeps its topic
			did := p.Did()
			if len(did) != 1 {
				t.Fatalf("the proxy did %q, want one fault", did)
			}
			kind := want[fault]
			if r.code != 1 || rep.Pass || rep.ViolationCounts[kind] == 0 || !strings.Contains(r.stderr, fmt.Sprintf("seed %d", seed)) ||
				!strings.Contains(r.stderr, "FAIL: ") || !strings.Contains(r.stderr, " "+kind) {
				t.Fatalf("the proxy: %s\nexit %d, counts %v; want a FAIL naming %s and seed %d\nstdout:\n%s\nstderr:\n%s", did[0], r.code, rep.ViolationCounts, kind, seed, r.stdout, r.stderr)
			}
			// The violation is where the fault was done: the batch the
			// proxy names, at or past after.
			m := regexp.MustCompile(`offsets? (\d+)`).FindStringSubmatch(did[0])
			if m == nil {
				t.Fatalf("the proxy's account %q names no offset", did[0])
			}
			at, err := strconv.ParseInt(m[1], 10, 64)
			if err != nil || at < after {
				t.Fatalf("the proxy's account %q: offset %d, %v; want one at or past %d", did[0], at, err, after)
			}
			mark := fmt.Sprintf("%s: %s-0 offset %d", kind, topic, at)
			if fault == faultproxy.Duplicate {
				mark = fmt.Sprintf("%s-0 offset %d and %s-0 offset", topic, at, topic)
			}
			if !strings.Contains(strings.Join(rep.Anomalies, "\n"), mark) {
				t.Fatalf("the proxy: %s\nno anomaly says %q:\n%s", did[0], mark, strings.Join(rep.Anomalies, "\n"))
			}
			// Each anomaly comes with the operations around it: what
			// was acknowledged, read and left in the log at the offsets
			// next to its own.
			for _, d := range rep.AnomalyDetails {
				if !strings.Contains(d.Anomaly, mark) {
					continue
				}
				around := strings.Join(d.Around, "\n")
				if !strings.HasPrefix(around, "around "+topic+"-0 offset ") || !strings.Contains(around, " acknowledged at ") || !strings.Contains(around, " log: key ") {
					t.Fatalf("anomaly %q, around it:\n%s\nwant the acknowledgements and the log near it", d.Anomaly, around)
				}
			}
			if !strings.Contains(r.stdout, "      around "+topic) && len(rep.AnomalyDetails) == 0 {
				t.Fatalf("no anomaly details: %s", r.stdout)
			}
		})
	}
}
