package faultproxy

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/record"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestStartRefusesABadConfig(t *testing.T) {
	for name, cfg := range map[string]Config{
		"unknown fault":         {Upstream: "127.0.0.1:1", Topic: "t", Fault: "corrupt"},
		"empty fault":           {Upstream: "127.0.0.1:1", Topic: "t"},
		"vanish with no reader": {Upstream: "127.0.0.1:1", Topic: "t", Fault: Vanish},
	} {
		t.Run(name, func(t *testing.T) {
			p, err := Start(cfg)
			if err == nil {
				p.Close()
				t.Fatal("no error")
			}
		})
	}
}

func frame(size int32, body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(size)), body...)
}

func TestReadFrameRefusesHostileSizes(t *testing.T) {
	for name, in := range map[string][]byte{
		"negative":       frame(-1, nil),
		"over the limit": frame(maxFrame+1, nil), // refused before it is allocated
		"truncated":      frame(10, []byte("abc")),
		"no size":        {0, 1},
	} {
		t.Run(name, func(t *testing.T) {
			if b, err := readFrame(bytes.NewReader(in)); err == nil {
				t.Fatalf("read %d bytes, want an error", len(b))
			}
		})
	}
	b, err := readFrame(bytes.NewReader(frame(3, []byte("abcdef"))))
	if err != nil || string(b) != "abc" {
		t.Fatalf("read %q, %v; want abc", b, err)
	}
}

func TestParseRequestHeader(t *testing.T) {
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12 // flexible: the header has tagged fields
	wire := md.AppendTo(appendRequestHeader(nil, md, 9, "fjord-verify-reader"))
	h, err := parseRequestHeader(wire)
	if err != nil {
		t.Fatal(err)
	}
	if h.key != 3 || h.version != 12 || h.clientID != "fjord-verify-reader" || h.size != 10+len("fjord-verify-reader")+1 {
		t.Fatalf("header %+v", h)
	}
	back := kmsg.NewPtrMetadataRequest()
	back.Version = 12
	if err := back.ReadFrom(wire[h.size:]); err != nil {
		t.Fatalf("the body after the header: %v", err)
	}

	for name, in := range map[string][]byte{
		"short":                     {0, 3, 0, 12},
		"unknown api key":           {0x7f, 0, 0, 0, 0, 0, 0, 9, 0, 0},
		"client id past the end":    {0, 3, 0, 1, 0, 0, 0, 9, 0x7f, 0xff, 'a'},
		"flexible with no tags":     {0, 3, 0, 12, 0, 0, 0, 9, 0, 0},
		"tag longer than the frame": {0, 3, 0, 12, 0, 0, 0, 9, 0, 0, 1, 0, 0x7f},
		"a billion tags":            {0, 3, 0, 12, 0, 0, 0, 9, 0, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03},
	} {
		t.Run(name, func(t *testing.T) {
			if h, err := parseRequestHeader(in); err == nil {
				t.Fatalf("parsed %+v, want an error", h)
			}
		})
	}
}

// faultAt is a proxy's fault logic alone, for fetches of batches.
func faultAt(fault Fault, after int64) *Proxy {
	p := &Proxy{cfg: Config{Topic: "t", Fault: fault, After: after, Reader: "reader"}}
	return p
}

func offsets(batches []batch) []int64 {
	var out []int64
	for _, b := range batches {
		out = append(out, b.baseOffset())
	}
	return out
}

func equal(a, b []int64) bool { return slices.Equal(a, b) }

func TestFaultsOnFetchedBatches(t *testing.T) {
	log := []batch{
		testBatch(t, 0, 3, record.CodecNone),
		testBatch(t, 3, 2, record.CodecNone),
		testBatch(t, 5, 4, record.CodecNone),
		testBatch(t, 9, 1, record.CodecNone),
	}
	serve := func(p *Proxy, from int, client string) []batch {
		p.mu.Lock()
		defer p.mu.Unlock()
		out, _ := p.faultLocked(append([]batch(nil), log[from:]...), nil, client)
		return out
	}

	t.Run("drop", func(t *testing.T) {
		p := faultAt(Drop, 4) // the first batch at or past 4 is the one at 5
		for range 3 {
			if got := offsets(serve(p, 0, "anyone")); !equal(got, []int64{0, 3, 9}) {
				t.Fatalf("served %v, want the batch at 5 dropped", got)
			}
		}
		if did := p.Did(); len(did) != 1 || !strings.Contains(did[0], "offset 5 (4 records) never served") {
			t.Fatalf("did %q", did)
		}
	})

	t.Run("vanish", func(t *testing.T) {
		p := faultAt(Vanish, 3)
		if got := offsets(serve(p, 0, "other")); !equal(got, []int64{0, 3, 5, 9}) {
			t.Fatalf("before the reader: served %v", got)
		}
		if got := offsets(serve(p, 1, "reader")); !equal(got, []int64{3, 5, 9}) {
			t.Fatalf("to the reader: served %v", got)
		}
		for _, client := range []string{"other", "reader"} {
			if got := offsets(serve(p, 0, client)); !equal(got, []int64{0, 5, 9}) {
				t.Fatalf("after the reader, to %s: served %v, want the batch at 3 gone", client, got)
			}
		}
	})

	t.Run("reorder", func(t *testing.T) {
		p := faultAt(Reorder, 5)
		// Only the target has arrived: it is held back, not served alone.
		p.mu.Lock()
		held, _ := p.faultLocked(append([]batch(nil), log[:3]...), nil, "anyone")
		p.mu.Unlock()
		if got := offsets(held); !equal(got, []int64{0, 3}) {
			t.Fatalf("with no batch after the target: served %v, want it held back", got)
		}
		for range 2 {
			got := serve(p, 0, "anyone")
			// The batch of 1 record (at 9) takes offset 5; the batch of 4
			// (at 5) follows at 6: the offsets stay contiguous, the
			// records are out of their order.
			if o := offsets(got); !equal(o, []int64{0, 3, 5, 6}) {
				t.Fatalf("served %v", o)
			}
			if got[2].records() != 1 || got[3].records() != 4 {
				t.Fatalf("served batches of %d and %d records at 5 and 6, want 1 and 4", got[2].records(), got[3].records())
			}
			for _, b := range got {
				if _, err := record.Validate(b, record.ValidateOptions{}); err != nil {
					t.Fatalf("a reordered batch is not valid: %v", err)
				}
			}
		}
	})

	t.Run("nothing at or past after", func(t *testing.T) {
		p := faultAt(Drop, 100)
		if got := offsets(serve(p, 0, "anyone")); !equal(got, []int64{0, 3, 5, 9}) {
			t.Fatalf("served %v", got)
		}
		if did := p.Did(); len(did) != 0 {
			t.Fatalf("did %q before the batch arrived", did)
		}
	})
}

// A client that sends garbage loses its connection and is reported; the
// proxy goes on relaying every other connection byte for byte.
func TestProxyRefusesAHostileClient(t *testing.T) {
	upstream, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer upstream.Close()
	received := make(chan []byte, 4)
	go func() {
		for {
			c, err := upstream.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, err := readFrame(c)
				if err == nil {
					received <- b
				}
				io.Copy(io.Discard, c)
			}()
		}
	}()
	p, err := Start(Config{Upstream: upstream.Addr().String(), Topic: "t", Fault: None})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	for name, in := range map[string][]byte{
		"oversized frame": frame(maxFrame+1, nil),
		"unknown api key": frame(10, []byte{0x7f, 0, 0, 0, 0, 0, 0, 9, 0, 0}),
		"bad produce":     frame(13, []byte{0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff}),
	} {
		t.Run(name, func(t *testing.T) {
			before := len(p.Errors())
			c, err := net.Dial("tcp", p.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(in); err != nil {
				t.Fatal(err)
			}
			if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
				t.Fatal(err)
			}
			if n, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatalf("read %d bytes, want the connection closed", n)
			} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("the proxy kept the connection open")
			}
			if errs := p.Errors(); len(errs) != before+1 {
				t.Fatalf("errors %q, want one more", errs)
			}
		})
	}

	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	want := req.AppendTo(appendRequestHeader(nil, req, 5, "client"))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := writeFrame(c, want); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-received:
		if !bytes.Equal(got, want) {
			t.Fatalf("the broker got %x, want %x", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the request never reached the broker")
	}
}
