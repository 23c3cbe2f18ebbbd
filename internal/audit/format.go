package audit

import (
	"strings"
	"time"
	"unicode/utf8"
)

// The file's format: one JSON object per line (JSON Lines), UTF-8, each
// line an event or a summary of events dropped before it:
//
//	{"time":"2025-01-02T03:04:05.678Z","event":"authentication","result":"failure","client":"10.0.0.7:51234","listener":"SASL_SSL","mechanism":"SCRAM-SHA-512","reason":"..."}
//	{"time":"2025-01-02T03:04:06.001Z","event":"authorization","result":"denied","principal":"User:alice","client":"10.0.0.8:40022","listener":"SASL_SSL","api":"Produce","operation":"WRITE","resource_type":"TOPIC","resource":"orders","rule":"..."}
//	{"time":"2025-01-02T03:04:09.120Z","event":"dropped","count":4180,"since":"2025-01-02T03:04:06.002Z","top":[{"host":"2001:db8:1:2::/64","count":4100},{"principal":"User:bob","host":"10.0.0.9","count":75}]}
//
// Times are UTC, RFC 3339 with milliseconds. A dropped line says that
// count events from since on were not written (rate limits, a full
// queue, or a failed write) before the line after it; it is written when
// writing resumes, or at Close. Its top names, most first, up to three
// of the rate limits' keys that dropped the most of them: the principal
// (none for a failed authentication) and the host, an IPv6 one as its
// /64, with at least how many each dropped (exact unless more than 16
// keys dropped; events lost to a failed write have no key).
//
// Every field but time, event and count may come from a client (a user
// name, a topic, an address), so they are encoded by encoding/json: a
// newline, quote or control character is escaped, invalid UTF-8 becomes
// U+FFFD, and no field can break out of its line or its string. Each is
// cut to MaxFieldBytes first, so one event is a few KiB at most
// (maxLineBytes) however long the names a client sent.

// MaxFieldBytes bounds each string field of a line; a longer one is cut
// and ends in "...".
const MaxFieldBytes = 512

// maxLineBytes bounds an encoded line: 12 string fields of MaxFieldBytes
// plus "...", each byte escaped to at most 6 ("\u001f", or "\ufffd" for
// an invalid byte), and the names and punctuation. MinMaxBytes is above
// it, so a line always fits in one file. A dropped line is shorter: its
// top holds at most six such strings (a principal and a host, which is
// cut from a client address, for each of three keys).
const maxLineBytes = 12*(MaxFieldBytes+3)*6 + 1024

// timeLayout is RFC 3339 with milliseconds; the times are UTC, so it
// ends in "Z".
const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// eventLine is an Event as its line holds it: the time formatted (the
// outer Time hides Event's for encoding/json, being shallower).
type eventLine struct {
	Time string `json:"time"`
	Event
}

// droppedLine is the summary of the events dropped before the next line.
type droppedLine struct {
	Time  string `json:"time"`
	Kind  string `json:"event"` // kindDropped
	Count int64  `json:"count"`
	Since string `json:"since"`
	// Top is droppers.top's: who dropped the most.
	Top []droppedKey `json:"top,omitempty"`
}

// droppedKey is one key of a dropped line's top.
type droppedKey struct {
	Principal string `json:"principal,omitempty"`
	Host      string `json:"host"`
	Count     int64  `json:"count"`
}

// kindDropped is the event of a dropped line.
const kindDropped = "dropped"

// cut returns s cut to MaxFieldBytes (at a rune's start, when s is
// UTF-8 there), with "..." after. A cut string is copied: a slice of it
// would keep the whole of a client's megabyte alive in the queue.
func cut(s string) string {
	if len(s) <= MaxFieldBytes {
		return s
	}
	i := MaxFieldBytes
	for j := 0; j < utf8.UTFMax-1 && i > 0 && !utf8.RuneStart(s[i]); j++ {
		i--
	}
	return strings.Clone(s[:i]) + "..."
}

// cutFields applies cut to every string field of e.
func cutFields(e *Event) {
	for _, f := range []*string{&e.Kind, &e.Result, &e.Principal, &e.Client, &e.Listener, &e.Mechanism,
		&e.API, &e.Operation, &e.ResourceType, &e.Resource, &e.Rule, &e.Reason} {
		*f = cut(*f)
	}
}
