package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// loadTimeout bounds reading StateTopic: its last stable offset can be
// held back by another migration's open transaction for at most that
// migration's transaction timeout.
const loadTimeout = 3 * txnTimeout

// ensureStateTopic creates StateTopic (compacted, one partition) unless
// it exists.
func (r *run) ensureStateTopic(ctx context.Context) error {
	md, err := r.adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	rf := int16(min(stateReplicas, max(1, len(md.Brokers))))
	compact := "compact"
	resp, err := r.adm.CreateTopic(ctx, 1, rf, map[string]*string{"cleanup.policy": &compact}, StateTopic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating %s: %w", StateTopic, kafkaError(err, resp.ErrMessage))
	}
	return nil
}

// loadState reads StateTopic's committed records to the end it had when
// asked (after start fenced this source's earlier run, so none of its
// transactions is left open to stop the read short). Records this code
// cannot decode are logged and left out.
func (r *run) loadState(ctx context.Context) (map[string]*states, error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	ends, err := r.adm.ListEndOffsets(ctx, StateTopic)
	if err != nil {
		return nil, fmt.Errorf("asking %s's end: %w", StateTopic, err)
	}
	end, ok := ends.Lookup(StateTopic, 0)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("asking %s's end: %v", StateTopic, end.Err)
	}
	all := map[string]*states{}
	if end.Offset == 0 {
		return all, nil
	}
	rd, err := kgo.NewClient(append(slices.Clone(r.cfg.Opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{StateTopic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // their offsets count towards the end
		kgo.FetchMaxWait(fetchMaxWait),
	)...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	for pos := int64(0); pos < end.Offset; {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reading %s to offset %d: at %d after %s: %w", StateTopic, end.Offset, pos, loadTimeout, ctx.Err())
		}
		if err := fetchError(fs); err != nil {
			return nil, fmt.Errorf("reading %s: %w", StateTopic, err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			pos = max(pos, rec.Offset+1)
			if rec.Attrs.IsControl() {
				return
			}
			if err := apply(all, rec.Key, rec.Value); err != nil {
				r.log.Warn("skipping a state record", "topic", StateTopic, "offset", rec.Offset, "err", err)
			}
		})
	}
	return all, nil
}
