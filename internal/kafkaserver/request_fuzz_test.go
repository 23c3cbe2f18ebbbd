package kafkaserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// FuzzRequest writes arbitrary bytes to the server as one connection's
// whole input (framing, headers and bodies of any API the server knows),
// then half-closes, and reads everything the server sends back.
//
// Invariants, checked for every input:
//   - nothing panics: a handler or response-encoder panic, which the
//     server recovers from in production to keep the node up, fails the
//     input here;
//   - the connection either answers or closes: what the server writes is
//     whole response frames (each at least a correlation id, none cut
//     off), after which it closes the connection before the deadline;
//   - the server stays up: a fresh connection's ApiVersions is answered
//     after every input.
//
// Seeds: empty, a zero-length frame, a header with the longest client id,
// valid requests of each data API, pipelined requests, and valid requests
// followed by garbage.
func FuzzRequest(f *testing.F) {
	fz := newFuzzServer(f)
	rf := kmsg.NewRequestFormatter(kmsg.FormatterClientID("fuzz"))
	enc := func(req kmsg.Request) []byte { return rf.AppendRequest(nil, req, 1) }
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0})
	longID := make([]byte, 32767)
	f.Add(frameOf(append(append(kbinHeaderPrefix(18, 0, 1), 0x7f, 0xff), longID...)))
	for _, req := range fuzzSeedRequests(f, fz.topicID) {
		f.Add(enc(req))
	}
	pipelined := append(enc(apiVersionsReq(3)), enc(metadataReq(9, false))...)
	pipelined = append(pipelined, enc(fetchReq(4, 0, 0, fetchPart{topic: "fuzz"}))...)
	f.Add(pipelined)
	f.Add(append(enc(apiVersionsReq(3)), 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 9, 1))
	f.Add(append(enc(produceReq(11, 1, "fuzz", 0, batch(f, "g", 2))), []byte("garbage after a valid frame")...))

	f.Fuzz(func(t *testing.T, input []byte) {
		fz.check(t, input)
	})
}

// FuzzAPIBodies fuzzes request bodies behind a well-formed frame and
// header, so the mutations reach kmsg's decoders and every handler (both
// halves of the API table) instead of dying at the framing. key and
// version are taken modulo the served range of a served API. Invariants
// as FuzzRequest's.
func FuzzAPIBodies(f *testing.F) {
	fz := newFuzzServer(f)
	for _, req := range fuzzSeedRequests(f, fz.topicID) {
		f.Add(uint8(req.Key()), uint8(req.GetVersion()), req.AppendTo(nil))
	}
	keys := make([]int16, 0, len(apis))
	for k := range apis {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	f.Fuzz(func(t *testing.T, keyIdx, version uint8, body []byte) {
		a := apis[keys[int(keyIdx)%len(keys)]]
		v := a.minVersion + int16(version)%(a.maxVersion-a.minVersion+1)
		req := fjordmsg.RequestForKey(a.key)
		req.SetVersion(v)
		frame := header(a.key, v, 1, req.IsFlexible())
		fz.check(t, frameOf(append(frame, body...)))
	})
}

// fuzzSeedRequests are valid requests of the data APIs and of every
// admin API at its lowest and highest version, plus a few that reach
// further into their handlers.
func fuzzSeedRequests(f *testing.F, topicID [16]byte) []kmsg.Request {
	reqs := []kmsg.Request{
		apiVersionsReq(3),
		apiVersionsReq(0),
		metadataReq(12, true, "fuzz", "auto"),
		metadataReq(0, false),
		produceReq(9, 1, "fuzz", 0, batch(f, "f", 3)),
		produceReq(3, -1, "fuzz", 1, batch(f, "f", 1)),
		produceReq(9, 0, "fuzz", 0, batch(f, "f", 1)),
		fetchReq(12, 100, 1, fetchPart{topic: "fuzz", partition: 0}),
		fetchReq(13, 100, 1, fetchPart{id: topicID, partition: 1}),
		sessionFetch(12, 0, 0, fetchPart{topic: "fuzz", partition: 0}),
	}
	for _, a := range slices.Concat(adminAPIs, groupAPIs, fjordAPIs) {
		for _, v := range []int16{a.minVersion, a.maxVersion} {
			req := fjordmsg.RequestForKey(a.key)
			req.SetVersion(v)
			reqs = append(reqs, req)
		}
	}
	// Group requests that get past the coordinator's first checks.
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.SessionTimeoutMillis, join.ProtocolType = 5, "fuzz-group", 10_000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Version, commit.Group, commit.Generation = 8, "fuzz-group", -1
	commit.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "fuzz", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 1, Offset: 3, LeaderEpoch: -1}}}}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.Version = 8
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "fuzz-group"}}
	// DescribeCluster v2 asking for fenced brokers (KIP-1073): the
	// default request leaves the v2 field false.
	cluster := kmsg.NewPtrDescribeClusterRequest()
	cluster.Version, cluster.IncludeFencedBrokers = 2, true
	positions := &fjordmsg.DescribePositionsRequest{Topics: []fjordmsg.DescribePositionsTopic{
		{Topic: "fuzz", Partitions: []fjordmsg.DescribePositionsPartition{{Partition: 0, Offsets: []int64{0, 2}}}}}}
	return append(reqs, join, commit, fetch, cluster, positions)
}

// fuzzServer is one Server shared by every input of a fuzz run, so "the
// server stays up" is checked across inputs too.
type fuzzServer struct {
	h       *wireHarness
	topicID [16]byte

	mu     sync.Mutex
	panics []string
}

func newFuzzServer(f *testing.F) *fuzzServer {
	fz := &fuzzServer{}
	fz.h = newWireHarness(f,
		withGroups(&memOffsetsLog{}),
		withConfig(func(c *Config) {
			c.MaxRequestBytes = 1 << 20
			c.IdleTimeout = 5 * time.Second
			c.Logger = slog.New(slog.DiscardHandler) // millions of closes
		}),
		withServer(func(s *Server) {
			s.testHookPanic = func(api string, r any) {
				fz.mu.Lock()
				defer fz.mu.Unlock()
				fz.panics = append(fz.panics, fmt.Sprintf("%s: %v", api, r))
			}
		}),
	)
	fz.h.reps.maxWait = 5 * time.Millisecond // fuzzed fetches carry any MaxWait
	fz.topicID = fz.h.ctrl.addTopic("fuzz", 2).ID
	return fz
}

// check sends input on a fresh connection, half-closes, reads all the
// server sends, and checks the invariants.
func (fz *fuzzServer) check(t *testing.T, input []byte) {
	nc, err := net.Dial("tcp", fz.h.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	// Write while reading: a server that stops reading until its answers
	// are read must not deadlock the test.
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		nc.Write(input) // fails if the server closed first: fine
		nc.(*net.TCPConn).CloseWrite()
	}()
	out, err := io.ReadAll(nc)
	<-wrote
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection neither answered nor closed within 20s (%d bytes read)", len(out))
	}
	for rest := out; len(rest) > 0; {
		if len(rest) < 4 {
			t.Fatalf("%d stray bytes after the last whole response", len(rest))
		}
		n := binary.BigEndian.Uint32(rest)
		if n < 4 || uint64(n) > uint64(len(rest)-4) {
			t.Fatalf("response frame of %d bytes with %d left", n, len(rest)-4)
		}
		rest = rest[4+n:]
	}
	fz.mu.Lock()
	p := fz.panics
	fz.panics = nil
	fz.mu.Unlock()
	if len(p) > 0 {
		t.Fatalf("panicked: %v", p)
	}
	fz.h.dialFor(t).roundTrip(apiVersionsReq(3))
}

// kbinHeaderPrefix is a request header's fixed part: key, version,
// correlation id.
func kbinHeaderPrefix(key, version int16, corr int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	return binary.BigEndian.AppendUint32(b, uint32(corr))
}
