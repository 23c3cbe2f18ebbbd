package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

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
