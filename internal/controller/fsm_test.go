package controller

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/metadata"
)

type memSink struct {
	bytes.Buffer
	cancelled, closed bool
}

func (s *memSink) ID() string                  { return "mem" }
func (s *memSink) Cancel() error               { s.cancelled = true; return nil }
func (s *memSink) Close() error                { s.closed = true; return nil }
func (s *memSink) Write(p []byte) (int, error) { return s.Buffer.Write(p) }

func entry(t *testing.T, index uint64, recs ...metadata.Record) *raft.Log {
	t.Helper()
	b, err := metadata.EncodeBatch(recs)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Type: raft.LogCommand, Data: b}
}

// TestFSM: batches apply whole or not at all, refusals leave the image as
// it was and are answered as errors, non-command entries are ignored, and
// a snapshot restores the same image.
func TestFSM(t *testing.T) {
	pub := newPublisher(metadata.Empty(testConfigs))
	defer pub.close()
	f := newFSM(slog.New(slog.DiscardHandler), pub, testConfigs)
	id := metadata.UUID{1}

	if resp := f.Apply(entry(t, 1, metadata.ClusterIDRecord{ClusterID: "c"}, metadata.BrokerRecord{NodeID: 1, Host: "h", Port: 1})); resp != nil {
		t.Fatalf("good batch: %v", resp)
	}
	if resp := f.Apply(&raft.Log{Index: 2, Type: raft.LogNoop}); resp != nil || f.applied.Load().Offset != 1 {
		t.Fatalf("noop entry: %v, offset %d", resp, f.applied.Load().Offset)
	}
	// A topic without partitions: refused, nothing of the batch applied.
	resp := f.Apply(entry(t, 3, metadata.ProducerIDsRecord{NodeID: 1, NextProducerID: 1000}, metadata.TopicRecord{Name: "t", ID: id}))
	if err, _ := resp.(error); !errors.Is(err, metadata.ErrBadRecord) {
		t.Fatalf("bad batch: %v", resp)
	}
	if img := f.applied.Load(); img.Offset != 1 || img.NextProducerID != 0 {
		t.Fatalf("refused batch changed the image: %+v", img)
	}
	if resp := f.Apply(entry(t, 5,
		metadata.TopicRecord{Name: "t", ID: id},
		metadata.PartitionRecord{TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	)); resp != nil {
		t.Fatal(resp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := pub.waitPublished(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if pub.published.Load() != f.applied.Load() {
		t.Fatal("publisher did not get the applied image")
	}

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	if err := snap.Persist(&sink); err != nil || !sink.closed {
		t.Fatalf("Persist: %v (closed %v)", err, sink.closed)
	}
	snap.Release()

	g := newFSM(slog.New(slog.DiscardHandler), pub, testConfigs)
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.applied.Load(), f.applied.Load()) {
		t.Fatal("restored image differs")
	}
	if err := g.Restore(io.NopCloser(bytes.NewReader([]byte(`{"version":9}`)))); err == nil {
		t.Fatal("restored a bad snapshot")
	}
}

// futureRecord is a record type of a Fjord newer than this one.
type futureRecord struct {
	Field string `json:"field"`
}

func (futureRecord) Type() string { return "from_a_newer_fjord" }

// TestFSMStopsOnAnEntryItCannotRead: an entry that does not decode here,
// or that needs a newer metadata version, is not skipped (the node would
// then hold an image its peers do not): the FSM stops, says so on
// Failed, and applies nothing after it.
func TestFSMStopsOnAnEntryItCannotRead(t *testing.T) {
	for _, bad := range []struct {
		name string
		log  func(index uint64) *raft.Log
		want error
	}{
		{"unknown record type", func(i uint64) *raft.Log { return entry(t, i, futureRecord{Field: "x"}) }, metadata.ErrDecode},
		{"not a batch", func(i uint64) *raft.Log { return &raft.Log{Index: i, Type: raft.LogCommand, Data: []byte("{")} }, metadata.ErrDecode},
		{"newer metadata version", func(i uint64) *raft.Log {
			return entry(t, i, metadata.MetadataVersionRecord{Version: metadata.KnownMetadataVersion + 1})
		}, metadata.ErrUnknownVersion},
	} {
		t.Run(bad.name, func(t *testing.T) {
			pub := newPublisher(metadata.Empty(testConfigs))
			defer pub.close()
			f := newFSM(slog.New(slog.DiscardHandler), pub, testConfigs)
			if resp := f.Apply(entry(t, 1, metadata.ClusterIDRecord{ClusterID: "c"}, metadata.MetadataVersionRecord{Version: 1})); resp != nil {
				t.Fatal(resp)
			}
			if err, _ := f.Apply(bad.log(2)).(error); !errors.Is(err, bad.want) {
				t.Fatalf("entry 2: %v, want %v", err, bad.want)
			}
			select {
			case <-f.failed:
			default:
				t.Fatal("the FSM did not stop")
			}
			if err, _ := f.Apply(entry(t, 3, metadata.BrokerRecord{NodeID: 1, Host: "h", Port: 1})).(error); err == nil {
				t.Fatal("an entry after the one it cannot read was applied")
			}
			if img := f.applied.Load(); img.Offset != 1 || len(img.Brokers) != 0 || img.MetadataVersion != 1 {
				t.Fatalf("image after the stop: offset %d, brokers %d, version %d; want what entry 1 made", img.Offset, len(img.Brokers), img.MetadataVersion)
			}
		})
	}
}
