package replica

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
)

// fakeDisk is a file system whose size and free space the test sets.
type fakeDisk struct {
	mu          sync.Mutex
	total, free int64
	err         error
}

func (f *fakeDisk) set(free int64) {
	f.mu.Lock()
	f.free = free
	f.mu.Unlock()
}

func (f *fakeDisk) statfs(string) (int64, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total, f.free, f.err
}

// newPressureEnv is a testEnv whose disk pressure reads disk, with the
// given static thresholds. Reads happen when the test calls check (the
// poller's interval is longer than any test).
func newPressureEnv(t *testing.T, disk *fakeDisk, warn, refuse string) *testEnv {
	t.Helper()
	e := newEnv(t, "")
	w, err := metadata.ParseFreeSpace(warn)
	if err != nil {
		t.Fatal(err)
	}
	r, err := metadata.ParseFreeSpace(refuse)
	if err != nil {
		t.Fatal(err)
	}
	d := newDiskPressure(e.m, w, r)
	d.statfs = disk.statfs
	d.check()
	e.m.disk = d
	return e
}

func appendErr(e *testEnv, topic string, data []byte) error {
	_, err := e.m.Append(context.Background(), topic, 0, data, AcksAll, 5*time.Second)
	return err
}

const mib = 1 << 20

// Below the refusal threshold a client produce is refused with
// KAFKA_STORAGE_ERROR before anything is appended, and a message that
// says why; it is taken again, by itself, once free space is back a
// margin above the threshold.
func TestDiskPressureRefusesAndResumes(t *testing.T) {
	disk := &fakeDisk{total: 1000 * mib, free: 500 * mib}
	e := newPressureEnv(t, disk, "20%", "100MiB")
	e.put(newTopic("orders", 1, 1, nil))

	e.append("orders", 0, batch(t, "a", 2, 1000), AcksAll)
	if s := e.m.DiskPressure(); s.State != DiskOK || s.FreeBytes != 500*mib || s.WarnBytes != 200*mib || s.RefuseBytes != 100*mib {
		t.Fatalf("stats %+v: want OK, 500 MiB free, warn at 200 MiB, refuse at 100 MiB", s)
	}

	disk.set(150 * mib) // below warn: nothing refused
	e.m.disk.check()
	if s := e.m.DiskPressure(); s.State != DiskWarn {
		t.Fatalf("state %d at 150 MiB free, want warn", s.State)
	}
	e.append("orders", 0, batch(t, "b", 1, 1001), AcksAll)

	disk.set(99 * mib) // below refuse
	e.m.disk.check()
	end := e.log("orders", 0).LogEndOffset()
	err := appendErr(e, "orders", batch(t, "c", 1, 1002))
	if !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce below the threshold: %v, want KAFKA_STORAGE_ERROR", err)
	}
	for _, want := range []string{"short of disk space", "99.0 MiB free", "log.dir.free.space.refuse is 104857600", "fetches go on"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if got := e.log("orders", 0).LogEndOffset(); got != end {
		t.Fatalf("log end moved from %d to %d on a refused produce", end, got)
	}
	if s := e.m.DiskPressure(); s.State != DiskRefuse || s.Refused != 1 {
		t.Fatalf("stats %+v: want refuse, 1 refused", s)
	}

	// Just above the threshold is not enough: the margin (a tenth of it)
	// keeps a disk at the edge from flapping.
	disk.set(105 * mib)
	e.m.disk.check()
	if err := appendErr(e, "orders", batch(t, "d", 1, 1003)); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce inside the margin: %v, want still refused", err)
	}
	disk.set(111 * mib)
	e.m.disk.check()
	if s := e.m.DiskPressure(); s.State != DiskWarn {
		t.Fatalf("state %d at 111 MiB free, want warn (refusal over, still below warn)", s.State)
	}
	e.append("orders", 0, batch(t, "e", 1, 1004), AcksAll)
	disk.set(900 * mib)
	e.m.disk.check()
	if s := e.m.DiskPressure(); s.State != DiskOK {
		t.Fatalf("state %d at 900 MiB free, want OK", s.State)
	}
}

// What keeps the cluster working is never refused: coordinators' writes
// to internal topics and transaction markers.
func TestDiskPressureSparesInternalWrites(t *testing.T) {
	disk := &fakeDisk{total: 1000 * mib, free: 10 * mib}
	e := newPressureEnv(t, disk, "20%", "100MiB")
	e.put(newTopic(metadata.ConsumerOffsetsTopic, 1, 1, nil), newTopic("orders", 2, 1, nil))
	if err := appendErr(e, "orders", batch(t, "a", 1, 1000)); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("client produce: %v, want KAFKA_STORAGE_ERROR", err)
	}
	e.append(metadata.ConsumerOffsetsTopic, 0, batch(t, "offsets", 1, 1000), AcksAll)
	if _, err := e.m.AppendAsCoordinator(context.Background(), "orders", 0, batch(t, "coord", 1, 1000), 5*time.Second, false, 0); err != nil {
		t.Fatalf("coordinator's write under disk pressure: %v", err)
	}
}

// Between two reads, client appends draw on the room left above the
// threshold: one that would go past it is refused at once, and so is
// everything after it until a read finds space.
func TestDiskPressureBudgetBetweenReads(t *testing.T) {
	disk := &fakeDisk{total: 1000 * mib, free: 100*mib + 3000}
	e := newPressureEnv(t, disk, "0", "100MiB")
	e.put(newTopic("orders", 1, 1, nil))
	small := batch(t, "a", 1, 1000)
	n := 0
	for ; n < 1000; n++ {
		if err := appendErr(e, "orders", small); err != nil {
			if !errors.Is(err, kerr.KafkaStorageError) {
				t.Fatalf("append %d: %v", n, err)
			}
			break
		}
	}
	if want := 3000 / len(small); n != want {
		t.Fatalf("%d appends of %d bytes went in with 3000 bytes of room, want %d", n, len(small), want)
	}
	if err := appendErr(e, "orders", small); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("after the budget ran out: %v, want refused", err)
	}
	disk.set(500 * mib)
	e.m.disk.check()
	e.append("orders", 0, small, AcksAll)
}

// The image's thresholds (the broker's own, else the cluster default)
// win over the static ones, and deleting them returns to the static.
func TestDiskPressureThresholdsFromImage(t *testing.T) {
	disk := &fakeDisk{total: 1000 * mib, free: 300 * mib}
	e := newPressureEnv(t, disk, "10%", "100MiB")
	e.put(newTopic("orders", 1, 1, nil))
	withConfigs := func(cfgs map[int32]map[string]string) {
		img := *e.img
		img.Offset++
		img.BrokerConfigs = cfgs
		e.img = &img
		e.m.ApplyImage(&img)
	}
	withConfigs(map[int32]map[string]string{-1: {metadata.FreeSpaceRefuseConfig: "40%"}})
	if err := appendErr(e, "orders", batch(t, "a", 1, 1000)); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("cluster default 40%% with 30%% free: %v, want refused", err)
	}
	withConfigs(map[int32]map[string]string{
		-1:       {metadata.FreeSpaceRefuseConfig: "40%"},
		testNode: {metadata.FreeSpaceRefuseConfig: "200MiB", metadata.FreeSpaceWarnConfig: "50%"},
	})
	if s := e.m.DiskPressure(); s.State != DiskWarn || s.RefuseBytes != 200*mib || s.WarnBytes != 500*mib {
		t.Fatalf("broker's own thresholds: %+v, want warn, refuse at 200 MiB, warn at 500 MiB", s)
	}
	e.append("orders", 0, batch(t, "b", 1, 1001), AcksAll)
	withConfigs(nil)
	if s := e.m.DiskPressure(); s.State != DiskOK || s.RefuseBytes != 100*mib || s.WarnBytes != 100*mib {
		t.Fatalf("back to the static thresholds: %+v, want OK, both at 100 MiB (warn is 10%% of 1000 MiB)", s)
	}
}

// A statfs that fails keeps the last judgement rather than guessing.
func TestDiskPressureStatfsFailure(t *testing.T) {
	disk := &fakeDisk{total: 1000 * mib, free: 50 * mib}
	e := newPressureEnv(t, disk, "10%", "100MiB")
	e.put(newTopic("orders", 1, 1, nil))
	disk.mu.Lock()
	disk.err, disk.free = errors.New("statfs: input/output error"), 900*mib
	disk.mu.Unlock()
	e.m.disk.check()
	if err := appendErr(e, "orders", batch(t, "a", 1, 1000)); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("statfs failing after a refusal: %v, want still refused", err)
	}
	disk.mu.Lock()
	disk.err = nil
	disk.mu.Unlock()
	e.m.disk.check()
	e.append("orders", 0, batch(t, "b", 1, 1001), AcksAll)
}
