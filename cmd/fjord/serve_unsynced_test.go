package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// --unsynced-writes-in-memory makes a SIGKILL lose what a power cut
// would: a real serve process writes acks=all records to a topic, is
// killed and started again on the same directory. Under
// flush.policy=interval with a flush.ms longer than the test, none of
// them had been fsynced and all are gone; under flush.policy=ack every
// acknowledged one was fsynced and all are there.
func TestServeUnsyncedWritesInMemory(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   int64 // records after the kill
	}{
		{"interval", 0},
		{"ack", 200},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			args := append([]string{"--data-dir", dir, "--unsynced-writes-in-memory"}, freePorts...)
			cmd, out, done := startServe(t, nil, args...)
			addr := logValue(t, out.String(), "kafka_addr")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()

			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequiredAcks(kgo.AllISRAcks()))
			if err != nil {
				t.Fatal(err)
			}
			adm := kadm.NewClient(cl)
			topic := "unsynced-" + tc.policy
			flushMs := "600000"
			configs := map[string]*string{"flush.policy": &tc.policy, "flush.ms": &flushMs}
			if r, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil || r.Err != nil {
				t.Fatalf("creating %s: %v %v", topic, err, r.Err)
			}
			for i := range 200 {
				r := &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "record-%d", i)}
				if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
					t.Fatalf("record %d: %v", i, err)
				}
			}
			if end := endOffset(t, ctx, adm, topic); end != 200 {
				t.Fatalf("before the kill: end offset %d, want 200", end)
			}
			cl.Close()

			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-done
			_, out, done = startServe(t, nil, args...)
			addr = logValue(t, out.String(), "kafka_addr")
			cl, err = kgo.NewClient(kgo.SeedBrokers(addr))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if end := endOffset(t, ctx, kadm.NewClient(cl), topic); end != tc.want {
				t.Fatalf("after the kill under flush.policy=%s: end offset %d, want %d\n%s", tc.policy, end, tc.want, out)
			}
		})
	}
}

// endOffset is partition 0's log end offset, once the node answers it.
func endOffset(t *testing.T, ctx context.Context, adm *kadm.Client, topic string) int64 {
	t.Helper()
	var end int64 = -1
	deadline := time.Now().Add(30 * time.Second)
	for {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			if o, ok := offs.Lookup(topic, 0); ok && o.Err == nil {
				return o.Offset
			} else if ok {
				err = o.Err
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("listing %s's end offset: %v (last %d)", topic, err, end)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
