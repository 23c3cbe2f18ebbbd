package poison_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/poison"
)

// Load is the read-only way in: without the topic it finds nothing and
// leaves no topic behind; with it, it holds what a Store holds.
func TestLoad(t *testing.T) {
	n := startNode(t, t.TempDir())
	ctx := ctxT(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(n)...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := admin(t, n)

	v, err := poison.Load(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if p, q := v.Policies(""), v.Pauses("", ""); len(p) != 0 || len(q) != 0 {
		t.Fatalf("Load without the topic: policies %+v, pauses %+v", p, q)
	}
	topics, err := adm.ListTopics(ctx, poison.Topic)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has(poison.Topic) {
		t.Fatalf("Load created %s", poison.Topic)
	}

	s := open(t, n)
	// Created by Open, nothing written yet: empty too.
	if v, err = poison.Load(ctx, cl); err != nil || len(v.Policies("")) != 0 {
		t.Fatalf("Load of the empty topic: %v %+v", err, v)
	}
	at := time.UnixMilli(time.Now().UnixMilli())
	for _, p := range []poison.Policy{
		{Group: "billing", Topic: "orders", Action: poison.ActionDLQ, MaxAttempts: 3},
		{Group: "billing", Topic: "refunds", Action: poison.ActionPause, MaxAttempts: 1, DLQTopic: "refunds-failed"},
		{Group: "audit", Topic: "orders", Action: poison.ActionPause, MaxAttempts: 2},
	} {
		if err := s.SetPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []poison.Pause{
		{Group: "billing", Topic: "orders", Partition: 1, Offset: 7, Reason: "bad json", Attempts: 3, At: at},
		{Group: "billing", Topic: "orders", Partition: 0, Offset: 2, Reason: "gone", Attempts: 1, At: at},
	} {
		if err := s.Pause(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// Removed again: Load applies the tombstones as the Store does.
	if err := s.ClearPolicy(ctx, "audit", "orders"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Resume(ctx, "billing", "orders", 0); err != nil {
		t.Fatal(err)
	}

	if v, err = poison.Load(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if got, want := v.Policies(""), s.Policies(""); len(got) != 2 || !reflect.DeepEqual(got, want) {
		t.Errorf("Load's policies %+v, the Store's %+v", got, want)
	}
	got, want := v.Pauses("billing", ""), s.Pauses("billing", "")
	if len(got) != 1 || got[0].Partition != 1 || got[0].Reason != "bad json" || !got[0].At.Equal(at) || !reflect.DeepEqual(got, want) {
		t.Errorf("Load's pauses %+v, the Store's %+v", got, want)
	}
	if v.Undecodable() != 0 {
		t.Errorf("Load skipped %d records", v.Undecodable())
	}
}
