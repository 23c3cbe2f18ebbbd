package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestConsumeFromTimeAndTail(t *testing.T) {
	n := startGroupNode(t)
	n.ok(t, "", "topic", "create", "ticks", "--partitions", "2")
	// Two batches an hour apart: offsets 0-2 and 3-4 of partition 0, 0
	// and 1 of partition 1.
	first := time.Now().Add(-2 * time.Hour).Truncate(time.Second)
	second := first.Add(time.Hour)
	n.produceAt(t, "ticks", 0, first, "a0", "a1", "a2")
	n.produceAt(t, "ticks", 1, first, "b0")
	n.produceAt(t, "ticks", 0, second, "a3", "a4")
	n.produceAt(t, "ticks", 1, second, "b1")
	consume := func(max int, args ...string) []string {
		t.Helper()
		r := n.ok(t, "", append([]string{"consume", "ticks", "--max-messages", fmt.Sprint(max), "--format", `%p/%o\n`}, args...)...)
		if r.stderr != fmt.Sprintf("consumed %s\n", plural(int64(max), "record")) {
			t.Errorf("consume %s: stderr %q", strings.Join(args, " "), r.stderr)
		}
		return sortedLines(r.stdout)
	}

	// -N: the last N records of each partition read; a partition holding
	// fewer is read from its start, saying nothing (kcat's -o -N).
	if got, want := consume(2, "--offset", "-1"), []string{"0/4", "1/1"}; !slices.Equal(got, want) {
		t.Errorf("--offset -1: %q, want %q", got, want)
	}
	for _, flag := range []string{"--offset", "--from-offset"} {
		if got, want := consume(3, flag, "-2"), []string{"0/3", "0/4", "1/0"}; !slices.Equal(got, want) {
			t.Errorf("%s -2: %q, want %q", flag, got, want)
		}
	}
	if got, want := consume(7, "--offset", "-100"), []string{"0/0", "0/1", "0/2", "0/3", "0/4", "1/0", "1/1"}; !slices.Equal(got, want) {
		t.Errorf("--offset -100: %q, want %q", got, want)
	}
	if got, want := consume(2, "--offset", "-9223372036854775807", "--partition", "1"), []string{"1/0", "1/1"}; !slices.Equal(got, want) {
		t.Errorf("--offset -MaxInt64 --partition 1: %q, want %q", got, want)
	}
	if got, want := consume(3, "--offset", "-3", "--partition", "0"), []string{"0/2", "0/3", "0/4"}; !slices.Equal(got, want) {
		t.Errorf("--offset -3 --partition 0: %q, want %q", got, want)
	}

	// --from-time: the first record at or after T in each partition, in
	// every spelling of T.
	mid := first.Add(30 * time.Minute)
	for _, ts := range []string{mid.UTC().Format(time.RFC3339), mid.Local().Format("2006-01-02T15:04:05"), fmt.Sprint(mid.UnixMilli())} {
		if got, want := consume(3, "--from-time", ts), []string{"0/3", "0/4", "1/1"}; !slices.Equal(got, want) {
			t.Errorf("--from-time %s: %q, want %q", ts, got, want)
		}
	}
	if got, want := consume(2, "--from-time", first.Format(time.RFC3339), "--partition", "1"), []string{"1/0", "1/1"}; !slices.Equal(got, want) {
		t.Errorf("--from-time of the first record: %q, want %q", got, want)
	}
	// After every record: the log end, so only what comes next.
	n.produceAt(t, "ticks", 1, time.Now(), "b2")
	if got, want := consume(1, "--from-time", second.Add(time.Minute).Format(time.RFC3339)), []string{"1/2"}; !slices.Equal(got, want) {
		t.Errorf("--from-time after the old records: %q, want %q", got, want)
	}

	for _, tc := range []struct {
		want string
		args []string
	}{
		{"--offset and --from-time exclude each other: give one", []string{"--offset", "-1", "--from-time", "0"}},
		{"--offset and --from-time exclude each other: give one", []string{"--from-offset", "-1", "--from-time", "0"}},
		{"--from-beginning and --offset exclude each other: give one", []string{"--from-offset", "-1", "--from-beginning"}},
		{"--from-beginning and --from-time exclude each other: give one", []string{"--from-beginning", "--from-time", "0"}},
		{"--from-beginning and --offset and --from-time exclude each other", []string{"--from-beginning", "--offset", "1", "--from-time", "0"}},
		{`--from-time "yesterday": want RFC 3339`, []string{"--from-time", "yesterday"}},
		{`--from-time "": want RFC 3339`, []string{"--from-time", ""}},
		{`--from-time "2024-02-30T00:00:00Z": want RFC 3339`, []string{"--from-time", "2024-02-30T00:00:00Z"}},
		{`--from-time "1969-07-20T20:17:00Z": before 1970-01-01T00:00:00Z`, []string{"--from-time", "1969-07-20T20:17:00Z"}},
		{`--from-time "-5": want RFC 3339`, []string{"--from-time", "-5"}},
		{`--from-time and --group exclude each other`, []string{"--from-time", "0", "--group", "g"}},
		{`--offset and --group exclude each other`, []string{"--offset", "-1", "--group", "g"}},
		{`invalid argument "-x" for "--offset" flag: allowed: an integer from -9223372036854775807 to 9223372036854775807 (-N: N records before the end)`, []string{"--offset", "-x"}},
		{`"--offset" flag: allowed: an integer from -9223372036854775807`, []string{"--offset", "-9223372036854775808"}},
		{"--offset 6 is outside partition ticks-0 (allowed: 0, its log start, to 5, its log end; -N: N records before the end)", []string{"--offset", "6", "--partition", "0"}},
	} {
		n.fails(t, tc.want, append([]string{"consume", "ticks", "--max-messages", "1"}, tc.args...)...)
	}
	r := fjord(t, "", "consume", "--help")
	for _, flag := range []string{"--from-time", "-N: N records before", "--from-offset"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("consume --help does not say %q:\n%s", flag, r.stdout)
		}
	}
}
