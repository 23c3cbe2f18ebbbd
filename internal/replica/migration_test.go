package replica

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/storage"
)

// A topic whose migration has cut over (metadata.MigratedToConfig)
// refuses producers' appends, naming the destination, while a
// transaction marker still ends a transaction left open on it; and
// DescribePositions reports the seal with the log end it has for good.
// Removing the config lets produces in again.
func TestMigratedTopicRefusesProduces(t *testing.T) {
	e := newEnv(t, "")
	topic := newTopic("r", 1, 1, nil)
	e.put(topic)
	e.append("r", 0, batch(t, "before", 3, 1), AcksAll)
	pending, err := e.m.StartAppend("r", 0, txnBatch(t, 9, 0, "open", 2), AcksAll)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pending.Wait(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	pos, err := e.m.DescribePositions("r", 0, nil)
	if err != nil || pos.MigratedTo != "" || pos.LogEndOffset != 5 {
		t.Fatalf("before the seal: %+v, %v", pos, err)
	}

	e.put(withConfigs(topic, map[string]string{metadata.MigratedToConfig: "r-v2"}))
	_, err = e.m.Append(context.Background(), "r", 0, batch(t, "after", 1, 2), AcksAll, 5*time.Second)
	if !errors.Is(err, ErrTopicMigrated) || !strings.Contains(err.Error(), "r-v2") {
		t.Fatalf("a produce to the sealed topic: %v, want ErrTopicMigrated naming r-v2", err)
	}
	if _, err := e.m.StartAppendVerified("r", 0, txnBatch(t, 9, 2, "more", 1), AcksAll, 0); !errors.Is(err, ErrTopicMigrated) {
		t.Fatalf("a transactional produce to the sealed topic: %v, want ErrTopicMigrated", err)
	}
	// The open transaction still ends: the last stable offset reaches
	// the log end, which the seal fixed.
	marker, err := e.m.StartTxnMarker("r", 0, storage.TxnMarker{ProducerID: 9, Commit: true})
	if err != nil {
		t.Fatalf("a marker on the sealed topic: %v", err)
	}
	if _, err := marker.Wait(context.Background(), 5*time.Second); err != nil {
		t.Fatal(err)
	}
	pos, err = e.m.DescribePositions("r", 0, nil)
	if err != nil || pos.MigratedTo != "r-v2" || pos.LogEndOffset != 6 || pos.HighWatermark != 6 || pos.LastStableOffset != 6 {
		t.Fatalf("sealed: %+v, %v; want migrated to r-v2, log end, high watermark and last stable offset 6", pos, err)
	}

	e.put(withConfigs(topic, nil))
	e.append("r", 0, batch(t, "unsealed", 1, 3), AcksAll)
}
