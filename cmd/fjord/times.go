package main

import (
	"fmt"
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
