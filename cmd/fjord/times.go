package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// datetimeLayouts are what --to-datetime and --from-time take: RFC 3339,
// and the same without a zone (local time), as Kafka's tool takes
// "YYYY-MM-DDTHH:mm:SS.sss".
var datetimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05"}

const datetimeHelp = "RFC 3339 (e.g. 2024-05-01T12:00:00Z or 2024-05-01T14:00:00+02:00), local time 2006-01-02T15:04:05[.000], or milliseconds since 1970 (as %t prints)"

// parseDatetime parses flag's value as a time a record timestamp can
// be compared with. A time before 1970 is refused: ListOffsets reads a
// negative timestamp as "the log end" (-1) or "the log start" (-2), not
// as a time.
func parseDatetime(flag, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	t, ok := time.Time{}, false
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		t, ok = time.UnixMilli(ms), true
	} else if t2, err := time.Parse(time.RFC3339Nano, s); err == nil {
		t, ok = t2, true
	} else {
		for _, layout := range datetimeLayouts[1:] {
			if t2, err := time.ParseInLocation(layout, s, time.Local); err == nil {
				t, ok = t2, true
				break
			}
		}
	}
	switch {
	case !ok:
		return time.Time{}, fmt.Errorf("%s %q: want %s", flag, s, datetimeHelp)
	case t.UnixMilli() < 0:
		return time.Time{}, fmt.Errorf("%s %q: before 1970-01-01T00:00:00Z, the earliest record timestamp", flag, s)
	}
	return t, nil
}

// parseBackDuration parses a duration back from now: Go's form (1h30m,
// 90s) or ISO 8601's, which Kafka's kafka-consumer-groups --by-duration
// takes (PT1H30M, P1D, P1DT12H; days are 24 hours, any case). Negative
// durations are refused: "back" by a negative duration is the future,
// which no record is at.
func parseBackDuration(s string) (time.Duration, error) {
	bad := errors.New("want a duration back from now, e.g. 1h30m or Kafka's PT1H30M (P1D is a day)")
	s = strings.TrimSpace(s)
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return 0, bad
		}
		return d, nil
	}
	u := strings.ToUpper(s)
	if !strings.HasPrefix(u, "P") || u == "P" || strings.HasSuffix(u, "T") {
		return 0, bad
	}
	days, clock, hasClock := strings.Cut(u[1:], "T")
	var total time.Duration
	add := func(n string, unit time.Duration) bool {
		v, err := strconv.ParseFloat(n, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) || v*float64(unit) > math.MaxInt64-float64(total) {
			return false
		}
		total += time.Duration(v * float64(unit))
		return true
	}
	if days != "" {
		n, ok := strings.CutSuffix(days, "D")
		if !ok || !add(n, 24*time.Hour) {
			return 0, bad
		}
	}
	if hasClock {
		// Hours, minutes and seconds, each at most once, in order.
		rest := clock
		for _, unit := range []struct {
			suffix string
			d      time.Duration
		}{{"H", time.Hour}, {"M", time.Minute}, {"S", time.Second}} {
			if n, after, ok := strings.Cut(rest, unit.suffix); ok {
				if !add(n, unit.d) {
					return 0, bad
				}
				rest = after
			}
		}
		if rest != "" {
			return 0, bad
		}
	}
	return total, nil
}
