package controller

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// fsm is the Raft state machine: the metadata image. One Raft log entry of
// type LogCommand is one batch of records (metadata.EncodeBatch), applied
// whole or not at all.
//
// Threads: raft calls Apply, Restore and Snapshot from its FSM goroutine,
// one at a time; Persist runs on another goroutine while Apply continues,
// which is safe because it only reads an immutable image. Proposers read
// the image through applied.
type fsm struct {
	log *slog.Logger
	pub *publisher
	// applied is the image after the last entry applied. Written only by
	// the FSM goroutine.
	applied atomic.Pointer[metadata.Image]
	// configs is the images' topic-config table (Config.TopicConfigs).
	configs *topicconfig.Table

	// stopped is set once, with the reason, when an entry cannot be
	// applied the way every node applies it (it does not decode, or it
	// needs a newer metadata version than this code knows); failed is
	// closed then. From there on nothing more is applied: this node
	// must not serve an image its peers do not have.
	stopped atomic.Pointer[error]
	failed  chan struct{}
}

var _ raft.FSM = (*fsm)(nil)

func newFSM(log *slog.Logger, pub *publisher, configs *topicconfig.Table) *fsm {
	f := &fsm{log: log, pub: pub, configs: configs, failed: make(chan struct{})}
	f.applied.Store(metadata.Empty(configs))
	return f
}

// Apply returns nil or the error that refused the batch. A refused batch
// is committed but changes nothing, on every node alike (Apply is
// deterministic), so a bad proposal never stops the log; the proposer sees
// the error. Refusals mean the controller validated too little: a bug,
// logged as an error. An entry this node cannot read as every node does
// (it does not decode, or needs a newer metadata version) is different:
// the FSM stops (stop), and the node with it.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	if err := f.stopped.Load(); err != nil {
		return *err
	}
	recs, err := metadata.DecodeBatch(l.Data)
	if err != nil {
		// Every node decodes the same bytes; one that cannot (a record
		// type from a newer Fjord that skipped the version gate, or
		// damage) must not go on without the change its peers applied.
		return f.stop(fmt.Errorf("metadata log entry %d does not decode on this node: %w", l.Index, err))
	}
	next, err := f.applied.Load().Apply(l.Index, recs...)
	if errors.Is(err, metadata.ErrUnknownVersion) {
		return f.stop(fmt.Errorf("metadata log entry %d: %w", l.Index, err))
	}
	if err != nil {
		f.log.Error("metadata log entry refused; skipped", "index", l.Index, "err", err)
		return fmt.Errorf("metadata log entry %d: %w", l.Index, err)
	}
	f.applied.Store(next)
	f.pub.push(next, l.Index)
	return nil
}

// stop records why this node can apply no more of the metadata log and
// returns it.
func (f *fsm) stop(err error) error {
	if f.stopped.CompareAndSwap(nil, &err) {
		f.log.Error("this node cannot apply the metadata log any further; it must stop", "err", err)
		close(f.failed)
	}
	return err
}

// Snapshot hands raft the current image; Persist encodes it.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	return imageSnapshot{img: f.applied.Load()}, nil
}

// Restore replaces the image with a snapshot's (at startup, and when a
// follower is sent a snapshot).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return fmt.Errorf("reading metadata snapshot: %w", err)
	}
	img, err := metadata.DecodeImage(b, f.configs)
	if err != nil {
		return fmt.Errorf("metadata snapshot: %w", err)
	}
	f.applied.Store(img)
	f.pub.push(img, img.Offset)
	return nil
}

type imageSnapshot struct{ img *metadata.Image }

func (s imageSnapshot) Persist(sink raft.SnapshotSink) error {
	b, err := metadata.EncodeImage(s.img)
	if err == nil {
		_, err = sink.Write(b)
	}
	if err != nil {
		sink.Cancel()
		return fmt.Errorf("writing metadata snapshot: %w", err)
	}
	return sink.Close()
}

func (imageSnapshot) Release() {}
