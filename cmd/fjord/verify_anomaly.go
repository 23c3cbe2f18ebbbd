package main

import (
	"fmt"
	"time"

	"github.com/fjordmq/fjord/internal/history"
)

// The operations around an anomaly. A line saying "offset 1207 lost"
// tells what broke; what a reader needs next is the neighbourhood: were
// the offsets before and after it acknowledged, when, was it served to a
// reader, what does the log hold there now, and which faults were in
// force then. That is what Jepsen's reports print beside each anomaly,
// and what a run's report prints here.

const (
	// aroundOffsets is how many offsets either side of an anomaly's are
	// listed.
	aroundOffsets = 2
	// aroundFaults is how far from an anomaly's time a fault (its start
	// to its heal) is listed with it.
	aroundFaults = 10 * time.Second
	// aroundValueChars is how much of a value a line quotes: enough for
	// the seed, producer and counter every value begins with.
	aroundValueChars = 32
)

// anomalyDetail is one violation and the operations around it.
type anomalyDetail struct {
	Anomaly string   `json:"anomaly"`
	Around  []string `json:"around"`
}

// aroundLines describes what happened around v: the operations at the
// offsets near its own (checker.Around), each with its time since the
// run's start, and the faults near its time. A violation about no
// record (a group's, a fault's) has none.
func aroundLines(checker *history.Checker, logs map[history.TopicPartition][]history.Record, v history.Violation, start time.Time, faults []faultEvent) []string {
	lines := []string{}
	if v.TopicPartition.Topic != "" && v.Offset >= 0 {
		lines = append(lines, fmt.Sprintf("around %s offset %d:", v.TopicPartition, v.Offset))
		for _, op := range checker.Around(logs, v.TopicPartition, v.Offset, aroundOffsets) {
			at := ""
			if !op.At.IsZero() {
				at = fmt.Sprintf(" at %.2fs", op.At.Sub(start).Seconds())
			}
			lines = append(lines, fmt.Sprintf("  offset %d %s%s: key %q value %q", op.Offset, op.What, at,
				truncate(string(op.Key), aroundValueChars), truncate(string(op.Value), aroundValueChars)))
		}
	}
	if !v.At.IsZero() {
		t := v.At.Sub(start).Seconds()
		var near []string
		for _, ev := range faults {
			if ev.At-aroundFaults.Seconds() <= t && t <= ev.HealedAt+aroundFaults.Seconds() {
				near = append(near, "  "+ev.String())
			}
		}
		if len(near) == 0 {
			lines = append(lines, fmt.Sprintf("no fault within %v of %.2fs", aroundFaults, t))
		} else {
			lines = append(lines, fmt.Sprintf("faults within %v of %.2fs:", aroundFaults, t))
			lines = append(lines, near...)
		}
	}
	return lines
}
