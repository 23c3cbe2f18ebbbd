package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/timeline"
)

// The report's files: what a run leaves to be looked at after it, beside
// what it prints. verify-SEED.json is the report -o json prints, and
// verify-SEED.png the run's timeline (internal/timeline): every fault as
// a span against the writes acknowledged and failed, the acknowledgement
// latency and the readers' and group's errors, second by second, so a
// reader sees what each fault did to the clients and how soon they
// recovered. Named by the seed, so a rerun of the same seed replaces its
// files and different seeds keep theirs.

// defaultVerifyReportDir is --report-dir's default, beside bench's
// bench-results.
const defaultVerifyReportDir = "./verify-results"

// writeVerifyReport writes r's files to dir (made if missing) and lists
// them in r.ReportFiles.
func writeVerifyReport(dir string, r *verifyReport, tl *timeline.Timeline) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	base := filepath.Join(dir, fmt.Sprintf("verify-%d", r.Seed))
	verdict := "PASS"
	if !r.Pass {
		verdict = fmt.Sprintf("FAIL (%d violations)", r.Violations)
	}
	where := r.Mode
	if r.Nodes > 0 {
		where = fmt.Sprintf("%d local nodes", r.Nodes)
	}
	// One line the width of the picture: the faults by kind are in the
	// JSON and on the spans' labels.
	title := fmt.Sprintf("fjord verify: %s workload on %s, seed %d: %s; %d acknowledged; faults: %d", r.Workload, where, r.Seed, verdict, r.Acked, len(r.Faults))
	if err := tl.WritePNG(base+".png", title); err != nil {
		return err
	}
	r.ReportFiles = []string{base + ".json", base + ".png"}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := base + ".json.tmp"
	err = os.WriteFile(tmp, append(data, '\n'), 0o644)
	if err == nil {
		err = os.Rename(tmp, base+".json")
	}
	if err != nil {
		os.Remove(tmp)
		r.ReportFiles = r.ReportFiles[1:] // the PNG alone
	}
	return err
}

// verifyReport is fjord verify -o json.
type verifyReport struct {
	Pass     bool   `json:"pass"`
	Workload string `json:"workload"`
	// Topic is the run's name (its topic, or its topics' stem, and its
	// group's name); Topics are the topics it wrote.
	Topic   string   `json:"topic"`
	Topics  []string `json:"topics"`
	Seed    uint64   `json:"seed"`
	Sent    int      `json:"sent"`
	Acked   int      `json:"acknowledged"`
	Failed  int      `json:"failed_writes"`
	Read    int      `json:"read_back"`
	Unacked int      `json:"unacknowledged_read_back"`
	// Aborted are the records of aborted transactions (the txn
	// workload), none of which may be read.
	Aborted int `json:"aborted,omitempty"`
	// LiveReads are the records a reader was served while the run went
	// on, each checked against the log read back at the end; reader
	// errors (a fetch that failed) are not violations.
	LiveReads        int    `json:"read_live"`
	ReaderErrors     int    `json:"reader_errors"`
	FirstReaderError string `json:"first_reader_error,omitempty"`
	// Commits are the group's acknowledged commits; group errors (a
	// failed fetch or commit) are not violations. GroupChurn counts the
	// groups workload's joins, leaves and deaths.
	Commits         int            `json:"group_commits"`
	GroupChurn      map[string]int `json:"group_churn"`
	GroupErrors     int            `json:"group_errors"`
	FirstGroupError string         `json:"first_group_error,omitempty"`
	// Mode is "brokers" or "local"; Nodes is --local's node count.
	Mode  string `json:"mode"`
	Nodes int    `json:"nodes,omitempty"`
	// Flush is the topic's flush.policy and flush.ms as the cluster
	// described them (absent for a broker that has none).
	Flush flushPolicy `json:"flush"`
	// Faults is every fault injected, in order, and FaultCounts their
	// count by kind.
	Faults      []faultEvent   `json:"faults"`
	FaultCounts map[string]int `json:"fault_counts"`
	// ReplicasCompared is how many partitions' replicas were compared
	// byte for byte (--local).
	ReplicasCompared int `json:"replicas_compared"`
	// DataDir is where a failed --local run's nodes are kept.
	DataDir string `json:"data_dir,omitempty"`
	// ReportFiles are the report's files (--report-dir).
	ReportFiles []string `json:"report_files"`
	Violations  int      `json:"violations"`
	// ViolationCounts is every violation's count by kind (history's
	// Kind* and verify's own kind* names).
	ViolationCounts map[string]int `json:"violation_counts"`
	// Anomalies are the first violations, each "kind: what was seen",
	// and AnomalyDetails the same with the operations around each.
	Anomalies      []string        `json:"anomalies"`
	AnomalyDetails []anomalyDetail `json:"anomaly_details"`
	// Allowed counts, by kind, the losses the topic's flush policy
	// allows (flush.policy=interval, every node killed at once): not
	// violations. AllowedExamples are the first of them.
	Allowed         int            `json:"allowed_losses"`
	AllowedCounts   map[string]int `json:"allowed_loss_counts"`
	AllowedExamples []string       `json:"allowed_loss_examples"`
	// FirstFailure is the first failed write's error (a failed write is
	// not a violation: it was never acknowledged).
	FirstFailure string `json:"first_failed_write,omitempty"`
	Command      string `json:"command"`
}

func (r verifyReport) printText(out io.Writer) error {
	verdict := "PASS"
	if !r.Pass {
		verdict = "FAIL"
	}
	on := r.Topic
	if len(r.Topics) > 1 {
		on = fmt.Sprintf("%d topics, %s to %s", len(r.Topics), r.Topics[0], r.Topics[len(r.Topics)-1])
	}
	fmt.Fprintf(out, "%s: %s workload on %s: %d sent, %d acknowledged, %d failed writes, %d read back (%d of them not acknowledged)\n",
		verdict, r.Workload, on, r.Sent, r.Acked, r.Failed, r.Read, r.Unacked)
	if r.Aborted > 0 {
		fmt.Fprintf(out, "%d records were written in aborted transactions; none may be read\n", r.Aborted)
	}
	fmt.Fprintf(out, "A reader was served %d records while it ran (%d reader errors); the group committed %d times (%d group errors)\n",
		r.LiveReads, r.ReaderErrors, r.Commits, r.GroupErrors)
	if len(r.GroupChurn) > 0 {
		fmt.Fprintf(out, "The group's members: %d joined, %d left, %d died\n", r.GroupChurn[churnJoin], r.GroupChurn[churnLeave], r.GroupChurn[churnDie])
	}
	fmt.Fprintf(out, "Faults: %s\n", faultSummary(r.FaultCounts))
	for _, ev := range r.Faults {
		fmt.Fprintf(out, "  %s\n", ev)
	}
	if r.ReplicasCompared > 0 {
		fmt.Fprintf(out, "Replicas compared byte for byte: %d partitions\n", r.ReplicasCompared)
	}
	if r.FirstFailure != "" {
		fmt.Fprintf(out, "First failed write: %s\n", r.FirstFailure)
	}
	if r.FirstReaderError != "" {
		fmt.Fprintf(out, "First reader error: %s\n", r.FirstReaderError)
	}
	if r.FirstGroupError != "" {
		fmt.Fprintf(out, "First group error: %s\n", r.FirstGroupError)
	}
	if r.Allowed > 0 {
		fmt.Fprintf(out, "%d acknowledged records lost as flush.policy=interval allows when every node dies at once (see the faults above): not violations. All it caused: %s; the first:\n",
			r.AllowedCounts[history.KindLost], countSummary(r.AllowedCounts))
		for _, a := range r.AllowedExamples {
			fmt.Fprintf(out, "  %s\n", a)
		}
	}
	if r.Violations > 0 {
		fmt.Fprintf(out, "%d violations (%s); the first:\n", r.Violations, countSummary(r.ViolationCounts))
		for _, a := range r.AnomalyDetails {
			fmt.Fprintf(out, "  %s\n", a.Anomaly)
			for _, line := range a.Around {
				fmt.Fprintf(out, "      %s\n", line)
			}
		}
	} else {
		beyond := ""
		if r.Allowed > 0 {
			beyond = "Beyond what the flush policy allows: "
		}
		fmt.Fprintln(out, beyond+"No acknowledged record lost or moved, none duplicated or never sent, every key and producer in order, nothing served to the reader then lost, the group's partitions owned once a generation, its commits never backwards nor past what was processed, and nothing below them skipped.")
	}
	if r.DataDir != "" {
		fmt.Fprintf(out, "The nodes' directories and logs are kept in %s\n", r.DataDir)
	}
	if len(r.ReportFiles) > 0 {
		fmt.Fprintf(out, "Report: %s\n", strings.Join(r.ReportFiles, ", "))
	}
	_, err := fmt.Fprintf(out, "Seed %d; to run it again: %s\n", r.Seed, r.Command)
	return err
}

// countSummary is "3 lost, 1 unstable-read", most frequent first.
func countSummary(counts map[string]int) string {
	kinds := slices.Collect(maps.Keys(counts))
	slices.SortFunc(kinds, func(a, b string) int { return cmp.Or(cmp.Compare(counts[b], counts[a]), cmp.Compare(a, b)) })
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%d %s", counts[k], k)
	}
	return strings.Join(parts, ", ")
}

// faultSummary is "2 kill, 1 pause", in allFaultKinds' order, or none.
func faultSummary(counts map[string]int) string {
	var parts []string
	for _, k := range allFaultKinds {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(parts) == 0 {
		return "none injected"
	}
	return strings.Join(parts, ", ")
}

// maxAnomalies bounds the violations a report lists; all are counted.
const maxAnomalies = 20

// addViolations counts vs by kind and lists the first of them, each
// with what around tells of it.
func (r *verifyReport) addViolations(vs []history.Violation, around func(history.Violation) []string) {
	for _, v := range vs {
		r.Violations++
		r.ViolationCounts[v.Kind]++
		if len(r.Anomalies) < maxAnomalies {
			r.Anomalies = append(r.Anomalies, v.String())
			r.AnomalyDetails = append(r.AnomalyDetails, anomalyDetail{Anomaly: v.String(), Around: around(v)})
		}
	}
}
