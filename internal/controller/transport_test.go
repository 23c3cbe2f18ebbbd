package controller

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
)

// The quorum's transport must not pipeline AppendEntries: hashicorp/raft's
// pipeline deadlocks when a follower answers Success=false (a restarted
// follower does), which stops replication to it for good and hangs
// Shutdown (see newTransport). With pipelining refused, raft replicates
// synchronously.
func TestTransportDoesNotPipeline(t *testing.T) {
	_, trans, err := newTransport("127.0.0.1:0", nil, slog.New(slog.DiscardHandler), newRaftLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	defer trans.Close()
	p, err := trans.AppendEntriesPipeline("2", "127.0.0.1:1")
	if p != nil {
		p.Close()
	}
	if !errors.Is(err, raft.ErrPipelineReplicationNotSupported) {
		t.Fatalf("AppendEntriesPipeline: %v, want %v", err, raft.ErrPipelineReplicationNotSupported)
	}
}
