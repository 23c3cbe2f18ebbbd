package main

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestProduceAndConsumeHeaders(t *testing.T) {
	topic := topicName("headers")
	ok(t, "", "topic", "create", topic)
	// Repeated keys are kept, in order, as Kafka keeps them; a value may
	// hold '=' and be empty; bytes that would make the line ambiguous or
	// unreadable are escaped on the way out.
	ok(t, "one\ntwo\n", "produce", topic,
		"--header", "trace=abc", "--header", "trace=def", "--header", "expr=a=b", "--header", "empty=",
		"--header", "list=x,y", "--header", "ctl=\x01\ttab", "--header", "utf8=smørbrød", "--header", `back=\`)
	ok(t, "three\n", "produce", topic)
	r := ok(t, "", "consume", topic, "--from-beginning", "--max-messages", "3", "--format", `%v [%h]\n`)
	want := `one [trace=abc,trace=def,expr=a\x3db,empty=,list=x\x2cy,ctl=\x01\x09tab,utf8=smørbrød,back=\x5c]` + "\n" +
		`two [trace=abc,trace=def,expr=a\x3db,empty=,list=x\x2cy,ctl=\x01\x09tab,utf8=smørbrød,back=\x5c]` + "\n" +
		"three []\n"
	if r.stdout != want {
		t.Errorf("consume %%h:\n got %q\nwant %q", r.stdout, want)
	}
	if r := fjord(t, "", "produce", "--help"); !strings.Contains(r.stdout, "--header") {
		t.Errorf("produce --help does not name --header:\n%s", r.stdout)
	}
	if r := fjord(t, "", "consume", "--help"); !strings.Contains(r.stdout, "%h headers") {
		t.Errorf("consume --help does not name %%h:\n%s", r.stdout)
	}
	for _, tc := range []struct{ want, header string }{
		{`--header "trace": want key=value (e.g. trace-id=abc; an empty value is key=)`, "trace"},
		{`--header "=abc": the key is empty`, "=abc"},
		{`--header "": want key=value`, ""},
	} {
		fails(t, tc.want, "produce", topic, "--header", tc.header, "--brokers", closedPort(t))
	}
}

func TestAppendHeaders(t *testing.T) {
	for _, tc := range []struct {
		headers []kgo.RecordHeader
		want    string
	}{
		{nil, ""},
		{[]kgo.RecordHeader{{Key: "k", Value: nil}}, "k="},
		{[]kgo.RecordHeader{{Key: "a=b", Value: []byte("c,d")}, {Key: "", Value: []byte{0xff, 'x', 0x7f}}}, `a\x3db=c\x2cd,=\xffx\x7f`},
		{[]kgo.RecordHeader{{Key: "é", Value: []byte("\u00a0\u2028")}}, `é=\xc2\xa0\xe2\x80\xa8`},
	} {
		if got := string(appendHeaders(nil, tc.headers)); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.headers, got, tc.want)
		}
	}
}
