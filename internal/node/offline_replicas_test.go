package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/testutil"
)

// offlineFakes are the reporter's surroundings: an image a test changes,
// the replica manager's offline list, and a controller that answers each
// report with answer (and, on success, puts the marks in the image, as
// the forwarding client returns once the image has them).
type offlineFakes struct {
	mu      sync.Mutex
	img     *metadata.Image
	offline []metadata.TopicIDPartition
	answer  func(call int) error
	reports [][]metadata.TopicIDPartition
	epochs  []int64
	// looks counts the reporter's reads of the image: one per try.
	looks int
}

const reporterNode int32 = 1

var reporterIncarnation = metadata.UUID{0x1c}

func (f *offlineFakes) Image() *metadata.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looks++
	return f.img
}

func (f *offlineFakes) OfflineReplicas() []metadata.TopicIDPartition {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.offline)
}

func (f *offlineFakes) ReportOfflineReplicas(_ context.Context, broker int32, epoch int64, parts []metadata.TopicIDPartition) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if broker != reporterNode {
		return fmt.Errorf("reported for broker %d", broker)
	}
	f.reports = append(f.reports, slices.Clone(parts))
	f.epochs = append(f.epochs, epoch)
	if err := f.answer(len(f.reports)); err != nil {
		return err
	}
	next := *f.img
	next.Offset++
	next.OfflineReplicas = map[int32]map[metadata.TopicIDPartition]struct{}{}
	for b, m := range f.img.OfflineReplicas {
		next.OfflineReplicas[b] = m
	}
	marks := map[metadata.TopicIDPartition]struct{}{}
	for k := range f.img.OfflineReplicas[broker] {
		marks[k] = struct{}{}
	}
	for _, p := range parts {
		marks[p] = struct{}{}
	}
	next.OfflineReplicas[broker] = marks
	f.img = &next
	return nil
}

func (f *offlineFakes) calls() ([][]metadata.TopicIDPartition, []int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.reports), slices.Clone(f.epochs)
}

func (f *offlineFakes) fail(tp ...metadata.TopicIDPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offline = append(f.offline, tp...)
}

// reporterImage has this node registered (when registered) at epoch 5,
// topic a of three partitions on nodes 1 and 2, and topic b's partition
// on nodes 2 and 3 only.
func reporterImage(registered bool) *metadata.Image {
	a := &metadata.Topic{Name: "a", ID: metadata.UUID{0xa}}
	for range 3 {
		a.Partitions = append(a.Partitions, metadata.Partition{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})
	}
	b := &metadata.Topic{Name: "b", ID: metadata.UUID{0xb}, Partitions: []metadata.Partition{{Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: 2}}}
	img := &metadata.Image{Offset: 10, Brokers: map[int32]metadata.Broker{},
		Topics: map[string]*metadata.Topic{"a": a, "b": b}, TopicsByID: map[metadata.UUID]*metadata.Topic{a.ID: a, b.ID: b}}
	if registered {
		img.Brokers[reporterNode] = metadata.Broker{NodeID: reporterNode, Epoch: 5, IncarnationID: reporterIncarnation}
	}
	return img
}

func newTestReporter(f *offlineFakes, log *testutil.Buffer) *offlineReporter {
	r := newOfflineReporter(f, f, slog.New(slog.NewTextHandler(log, nil)), reporterNode, reporterIncarnation)
	r.retryMin, r.retryMax = time.Millisecond, 4*time.Millisecond
	r.start(f)
	return r
}

// The reporter waits for its registration, then reports each failed
// replica the image still puts on this node and does not show offline,
// at its broker epoch, asking again after the controller moves, a
// timeout and a refusal, until the image shows it; then nothing more
// until another log fails, which is reported alone. A deleted topic's
// partition, one moved off this node and an unknown one are never
// reported. Only the refusal is a warning.
func TestOfflineReporterReportsUntilShown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	a, b := metadata.UUID{0xa}, metadata.UUID{0xb}
	f := &offlineFakes{img: reporterImage(false), answer: func(call int) error {
		switch call {
		case 1:
			return fmt.Errorf("%w: moving", controlplane.ErrNotController)
		case 2:
			return fmt.Errorf("%w: slow", controlplane.ErrTimedOut)
		case 3:
			return errors.New("a refusal the reporter does not know")
		}
		return nil
	}}
	f.fail(metadata.TopicIDPartition{TopicID: a, Partition: 1}, metadata.TopicIDPartition{TopicID: b, Partition: 0},
		metadata.TopicIDPartition{TopicID: metadata.UUID{0xde}, Partition: 0})
	log := &testutil.Buffer{}
	r := newTestReporter(f, log)
	defer r.close()
	r.note("a", a, 1)
	// Not registered: nothing can be reported (a report names the
	// epoch), however often it looks.
	testutil.Eventually(t, 5*time.Second, func() error {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.looks < 5 {
			return fmt.Errorf("%d looks at the image", f.looks)
		}
		return nil
	})
	if reports, _ := f.calls(); len(reports) != 0 {
		t.Fatalf("reported %v before this node's registration was in its image", reports)
	}
	f.mu.Lock()
	f.img = reporterImage(true)
	f.mu.Unlock()
	testutil.Eventually(t, 5*time.Second, func() error {
		if !f.Image().ReplicaOffline(reporterNode, a, 1) {
			reports, _ := f.calls()
			return fmt.Errorf("not shown offline after %d reports", len(reports))
		}
		return nil
	})
	f.fail(metadata.TopicIDPartition{TopicID: a, Partition: 2})
	r.note("a", a, 2)
	testutil.Eventually(t, 5*time.Second, func() error {
		if !f.Image().ReplicaOffline(reporterNode, a, 2) {
			return errors.New("a-2 not shown offline")
		}
		return nil
	})
	r.close()
	reports, epochs := f.calls()
	one := []metadata.TopicIDPartition{{TopicID: a, Partition: 1}}
	want := [][]metadata.TopicIDPartition{one, one, one, one, {{TopicID: a, Partition: 2}}}
	if !slices.EqualFunc(reports, want, slices.Equal) {
		t.Fatalf("reports %v, want %v", reports, want)
	}
	for _, e := range epochs {
		if e != 5 {
			t.Fatalf("reported at epochs %v, want 5", epochs)
		}
	}
	logged := log.String()
	if strings.Count(logged, "level=WARN") != 1 || strings.Count(logged, "reported offline replicas to the controller") != 2 {
		t.Errorf("want one warning (the unknown refusal) and two reports logged:\n%s", logged)
	}
}

// More offline replicas than one report holds go in several, each of at
// most controlplane.MaxReportedOfflineReplicas.
func TestOfflineReporterSplitsLargeReports(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	img := reporterImage(true)
	big := &metadata.Topic{Name: "big", ID: metadata.UUID{0xbb}}
	var failed []metadata.TopicIDPartition
	for i := range controlplane.MaxReportedOfflineReplicas + 5 {
		big.Partitions = append(big.Partitions, metadata.Partition{Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
		failed = append(failed, metadata.TopicIDPartition{TopicID: big.ID, Partition: int32(i)})
	}
	img.Topics["big"], img.TopicsByID[big.ID] = big, big
	f := &offlineFakes{img: img, offline: failed, answer: func(int) error { return nil }}
	r := newTestReporter(f, &testutil.Buffer{})
	r.note("big", big.ID, 0)
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := len(f.Image().OfflineReplicas[reporterNode]); n != len(failed) {
			return fmt.Errorf("%d of %d shown offline", n, len(failed))
		}
		return nil
	})
	r.close()
	reports, _ := f.calls()
	if len(reports) != 2 || len(reports[0]) != controlplane.MaxReportedOfflineReplicas || len(reports[1]) != 5 {
		sizes := []int{}
		for _, r := range reports {
			sizes = append(sizes, len(r))
		}
		t.Fatalf("reports of %v replicas, want [%d 5]", sizes, controlplane.MaxReportedOfflineReplicas)
	}
}
