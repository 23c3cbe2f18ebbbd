package node

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testutil"
)

// Committed offsets live in __consumer_offsets: after a restart the
// coordinator rebuilds them from the log (offsetstopic.Loader and Log) and
// answers exactly what was acknowledged before.
func TestGroupOffsetsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.GroupInitialRebalanceDelay = -1
	n := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, n))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	var want kadm.Offsets
	for round := range 3 { // later commits replace earlier ones
		want = kadm.Offsets{}
		for p := range int32(3) {
			want.Add(kadm.Offset{Topic: "orders", Partition: p, At: int64(10*round) + int64(p), LeaderEpoch: -1, Metadata: "round"})
		}
		resp, err := adm.CommitOffsets(ctx, "billing", want)
		if err != nil || resp.Error() != nil {
			t.Fatalf("commit round %d: %v, %v", round, err, resp.Error())
		}
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n2 := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n2.Ready)
	adm2 := kadm.NewClient(newClient(t, n2))
	var got kadm.OffsetResponses
	testutil.Eventually(t, 20*time.Second, func() error {
		var err error
		got, err = adm2.FetchOffsets(ctx, "billing")
		if err == nil {
			err = got.Error()
		}
		return err // COORDINATOR_LOAD_IN_PROGRESS while the partition loads
	})
	for p := range int32(3) {
		o, ok := got.Lookup("orders", p)
		if !ok || o.At != want["orders"][p].At || o.Metadata != "round" {
			t.Errorf("partition %d after restart: %+v (found %v), want offset %d", p, o, ok, want["orders"][p].At)
		}
	}
}

// A group whose metadata record cannot be written (larger than
// __consumer_offsets' max.message.bytes), because of a member's
// subscription metadata or the leader's assignment, is answered as Kafka
// answers it, UNKNOWN_SERVER_ERROR on SyncGroup, and nothing of it is
// stored.
func TestGroupMetadataTooLargeToStore(t *testing.T) {
	t.Run("member metadata", func(t *testing.T) { testGroupTooLargeToStore(t, 2<<20, 1) })
	t.Run("assignment", func(t *testing.T) { testGroupTooLargeToStore(t, 1, 2<<20) })
}

func testGroupTooLargeToStore(t *testing.T, metadataBytes, assignmentBytes int) {
	cfg := testConfig(t, t.TempDir())
	cfg.GroupInitialRebalanceDelay = -1
	n := startNode(t, cfg)
	testutil.Eventually(t, 10*time.Second, n.Ready)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := newClient(t, n)

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey = "huge"
	testutil.Eventually(t, 20*time.Second, func() error {
		resp, err := find.RequestWith(ctx, cl)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		return err
	})
	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "huge", 10_000, 10_000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: make([]byte, metadataBytes)}}
	var jr *kmsg.JoinGroupResponse
	testutil.Eventually(t, 20*time.Second, func() error {
		var err error
		jr, err = join.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if jr.ErrorCode == kerr.MemberIDRequired.Code {
			join.MemberID = jr.MemberID
		}
		return kerr.ErrorForCode(jr.ErrorCode) // loading: retry
	})
	sync := kmsg.NewPtrSyncGroupRequest()
	sync.Group, sync.MemberID, sync.Generation = "huge", jr.MemberID, jr.Generation
	sync.ProtocolType, sync.Protocol = jr.ProtocolType, jr.Protocol // v5+ names them
	sync.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: make([]byte, assignmentBytes)}}
	sr, err := sync.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if sr.ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("SyncGroup: %v, want UNKNOWN_SERVER_ERROR", kerr.ErrorForCode(sr.ErrorCode))
	}
	describe := kmsg.NewPtrDescribeGroupsRequest()
	describe.Groups = []string{"huge"}
	dr, err := describe.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range dr.Groups {
		if g.State == "Stable" {
			t.Fatalf("the group became Stable although its assignment was not written: %+v", g)
		}
		for _, m := range g.Members {
			if len(m.MemberAssignment) > 0 {
				t.Fatalf("member %s has a %d-byte assignment after the write failed", m.MemberID, len(m.MemberAssignment))
			}
		}
	}
}

// The coordinator's loading of __consumer_offsets is one log line per
// start, not one (or two) per partition: a node that leads all 50
// partitions says once that its groups are served, with the partitions
// and records it replayed; each partition's load is at debug level.
func TestGroupLoadLogsOneSummaryLine(t *testing.T) {
	dir := t.TempDir()
	for start := range 2 {
		logs := &recordedLogs{}
		cfg := testConfig(t, dir)
		cfg.GroupInitialRebalanceDelay = -1
		cfg.Logger = slog.New(logs)
		n := startNode(t, cfg)
		testutil.Eventually(t, 10*time.Second, n.Ready)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		adm := kadm.NewClient(newClient(t, n))
		if start == 0 {
			if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
				t.Fatal(err)
			}
		}
		// A commit is answered once its partition is loaded; the other
		// 49 load at the same time, and Close waits for any still going.
		testutil.Eventually(t, 20*time.Second, func() error {
			resp, err := adm.CommitOffsets(ctx, "billing", kadm.Offsets{"orders": {0: {Topic: "orders", At: int64(start + 1), LeaderEpoch: -1}}})
			if err == nil {
				err = resp.Error()
			}
			return err
		})
		cancel()
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}

		summaries := logs.matching("group coordinator loaded partitions")
		if len(summaries) != 1 {
			t.Fatalf("start %d: %d summary lines, want 1: %v", start, len(summaries), summaries)
		}
		if got := summaries[0]["partitions"]; got != "50" {
			t.Errorf("start %d: summary says partitions=%s, want 50", start, got)
		}
		if start == 1 && summaries[0]["records"] == "0" {
			t.Errorf("restart replayed no records, but the first start committed an offset: %v", summaries[0])
		}
		if per := len(logs.matching("group coordinator loaded partition")) + len(logs.matching("group: partition loaded")); per != 0 {
			t.Errorf("start %d: %d per-partition load lines at info level, want none", start, per)
		}
	}
}

// recordedLogs is a slog.Handler that keeps each info-or-above record's
// message and attributes, for tests that check what a node logs.
type recordedLogs struct {
	mu   sync.Mutex
	recs []map[string]string // "msg" and each attribute, as text
}

func (h *recordedLogs) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (h *recordedLogs) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *recordedLogs) WithGroup(string) slog.Handler                { return h }

func (h *recordedLogs) Handle(_ context.Context, r slog.Record) error {
	m := map[string]string{"msg": r.Message}
	r.Attrs(func(a slog.Attr) bool {
		m[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, m)
	h.mu.Unlock()
	return nil
}

// matching returns the records whose message is msg exactly.
func (h *recordedLogs) matching(msg string) []map[string]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []map[string]string
	for _, m := range h.recs {
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}
