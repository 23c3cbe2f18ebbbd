package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
)

// Regression: records over about 1 MB could not be written with `fjord
// produce` even to a topic whose max.message.bytes allowed them: the
// client capped batches at franz-go's default 1,000,012 bytes and the
// error (MESSAGE_TOO_LARGE) read as if the node had refused them.
func TestProduceLargeRecords(t *testing.T) {
	topic := topicName("large")
	ok(t, "", "topic", "create", topic, "--config", "max.message.bytes=16777216")
	for _, mb := range []int{1, 5, 15} {
		value := strings.Repeat(fmt.Sprint(mb%10), mb<<20)
		r := ok(t, value+"\n", "produce", topic)
		if !strings.Contains(r.stderr, "produced 1 record to "+topic) {
			t.Fatalf("%d MB record: %s", mb, r.stderr)
		}
	}
	r := ok(t, "", "consume", topic, "--from-beginning", "--max-messages", "3", "--format", `%o %v\n`)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("consumed %d lines, want 3", len(lines))
	}
	for i, mb := range []int{1, 5, 15} {
		want := fmt.Sprintf("%d %s", i, strings.Repeat(fmt.Sprint(mb%10), mb<<20))
		if lines[i] != want {
			t.Errorf("record %d: %d bytes read back, want %d", i, len(lines[i]), len(want))
		}
	}

	// Over the topic's limit: the message says the limit and whose it is.
	small := topicName("large-limited")
	ok(t, "", "topic", "create", small, "--config", "max.message.bytes=2000000")
	res := fjord(t, "ok\n"+strings.Repeat("y", 3<<20)+"\nok\n", "produce", small, "--brokers", brokers(t))
	if res.code != 1 {
		t.Fatalf("3 MB record to a 2 MB topic: exit %d\n%s", res.code, res.stderr)
	}
	for _, want := range []string{
		"produced 2 records to " + small + "; 1 failed\n",
		"fjord: record from line 2 (3145728 bytes): MESSAGE_TOO_LARGE: over the limit of 2000000 bytes per record batch, topic " + small + "'s max.message.bytes",
	} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, res.stderr)
		}
	}

	// --max-message-bytes sets the client's limit explicitly: below the
	// topic's it refuses early, naming the flag; above it, the node
	// refuses, and the message names the topic's setting.
	res = fjord(t, strings.Repeat("z", 1500000)+"\n", "produce", small, "--max-message-bytes", "1000000", "--brokers", brokers(t))
	if want := "record from line 1 (1500000 bytes): MESSAGE_TOO_LARGE: over the limit of 1000000 bytes per record batch, --max-message-bytes"; res.code != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("exit %d, stderr does not say %q:\n%s", res.code, want, res.stderr)
	}
	res = fjord(t, strings.Repeat("z", 2500000)+"\n", "produce", small, "--max-message-bytes", "4000000", "--brokers", brokers(t))
	if want := "record from line 1 (2500000 bytes): MESSAGE_TOO_LARGE: over the limit of 2000000 bytes per record batch, topic " + small + "'s max.message.bytes"; res.code != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("exit %d, stderr does not say %q:\n%s", res.code, want, res.stderr)
	}
	r = ok(t, strings.Repeat("w", 1900000)+"\n", "produce", small, "--max-message-bytes", "4000000")
	if !strings.Contains(r.stderr, "produced 1 record") {
		t.Errorf("1.9 MB record under both limits: %s", r.stderr)
	}
}

func TestProduceLargeRecordToNewTopic(t *testing.T) {
	// A topic the produce creates gets the node's default limit, and the
	// message says that is where the limit comes from.
	topic := topicName("large-new")
	res := fjord(t, strings.Repeat("n", 1500000)+"\n", "produce", topic, "--brokers", brokers(t))
	want := "record from line 1 (1500000 bytes): MESSAGE_TOO_LARGE: over the limit of 1048588 bytes per record batch, the default max.message.bytes of a new topic " + topic
	if res.code != 1 || !strings.Contains(res.stderr, want) {
		t.Errorf("exit %d, stderr does not say %q:\n%s", res.code, want, res.stderr)
	}
	// --help names the flag.
	if r := fjord(t, "", "produce", "--help"); !strings.Contains(r.stdout, "--max-message-bytes") {
		t.Errorf("produce --help does not name --max-message-bytes:\n%s", r.stdout)
	}
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("l", 200<<10) // longer than the reader's buffer
	for _, tc := range []struct {
		in   string
		max  int
		want []string // "<nil>" for a line too long, with its length after it
	}{
		{"a\n\nb", 10, []string{"a", "", "b"}},
		{"\n", 10, []string{""}},
		{"exactly10!\n11 bytes...\nok\n", 10, []string{"exactly10!", "<nil> 11", "ok"}},
		{long + "\nshort\n" + long, len(long), []string{long, "short", long}},
		{long + "\nshort\n" + long, len(long) - 1, []string{fmt.Sprintf("<nil> %d", len(long)), "short", fmt.Sprintf("<nil> %d", len(long))}},
	} {
		br := bufio.NewReaderSize(strings.NewReader(tc.in), 16)
		var got []string
		for {
			data, n, err := readLine(br, tc.max)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			if errors.Is(err, io.EOF) && n == 0 {
				break
			}
			switch {
			case data == nil:
				got = append(got, fmt.Sprintf("<nil> %d", n))
			case len(data) != n:
				t.Errorf("%q: line of %d bytes, n says %d", tc.in, len(data), n)
			default:
				got = append(got, string(data))
			}
			if err != nil {
				break
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("readLine(%.40q, max %d): %.200q, want %.200q", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestLineQueue(t *testing.T) {
	for _, tc := range []struct{ maxLine, want int }{
		{0, 64}, {1 << 10, 64}, {1048588, 63}, {16 << 20, 4}, {maxClientBatchBytes, 1},
	} {
		if got := lineQueue(tc.maxLine); got != tc.want {
			t.Errorf("lineQueue(%d) = %d, want %d", tc.maxLine, got, tc.want)
		}
	}
}
