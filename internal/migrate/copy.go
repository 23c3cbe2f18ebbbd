package migrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/failpoint"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
)

// copyUntilCaughtUp copies chunks until the copy has reached the
// source's last stable offsets as asked when it starts: under
// continuous produce the source is never caught up with for good, so
// "caught up" is "within what arrived while the last chunks were
// copied", which the cutover's drain then copies.
func (r *run) copyUntilCaughtUp(ctx context.Context) error {
	var ends kadm.ListedOffsets
	if err := retry(ctx, func() error {
		var err error
		if ends, err = r.adm.ListCommittedOffsets(ctx, r.m.Source); err == nil {
			err = ends.Error()
		}
		return err
	}); err != nil {
		return fmt.Errorf("asking %s's last stable offsets: %w", r.m.Source, err)
	}
	for {
		next := r.cps[len(r.cps)-1].SourceNext
		r.behind = 0
		for p := range next {
			o, ok := ends.Lookup(r.m.Source, int32(p))
			if !ok {
				return fmt.Errorf("no last stable offset for %s", partitionString(r.m.Source, int32(p)))
			}
			r.behind += max(0, o.Offset-next[p])
		}
		r.report(false)
		if r.behind == 0 {
			return nil
		}
		if err := r.copyChunk(ctx); err != nil {
			return err
		}
	}
}

// copyChunk copies what one poll of the source brings, in one
// transaction with the checkpoint that records it. Records are placed by
// their key on the destination's partitions (murmur2, as a Kafka
// producer places them), and records without a key go to source
// partition modulo destination partitions, so every record of a source
// partition with a given key, or of a keyless run, keeps its order.
// Transaction markers and aborted records on the source are not copied
// (the reader is read_committed) but their offsets are passed.
//
// An error leaves the reader ahead of the last checkpoint: the run must
// end, and the next one starts from the checkpoint.
func (r *run) copyChunk(ctx context.Context) error {
	last := r.cps[len(r.cps)-1]
	if r.src == nil {
		at := make(map[int32]kgo.Offset, len(last.SourceNext))
		for p, next := range last.SourceNext {
			at[int32(p)] = kgo.NewOffset().At(next)
		}
		var err error
		if r.src, err = kgo.NewClient(append(slices.Clone(r.cfg.Opts),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.m.Source: at}),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords(), // their offsets count
			kgo.FetchMaxWait(fetchMaxWait),
		)...); err != nil {
			return err
		}
	}
	pollCtx, cancel := context.WithTimeout(ctx, 5*fetchMaxWait)
	fs := r.src.PollRecords(pollCtx, maxChunkRecords)
	cancel()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := fetchError(fs); err != nil {
		return fmt.Errorf("reading %s: %w", r.m.Source, err)
	}
	cp := Checkpoint{Seq: last.Seq + 1, SourceNext: slices.Clone(last.SourceNext), DestNext: slices.Clone(last.DestNext)}
	var out []*kgo.Record
	fs.EachRecord(func(rec *kgo.Record) {
		p := int(rec.Partition)
		if rec.Topic != r.m.Source || p >= len(cp.SourceNext) || rec.Offset < cp.SourceNext[p] {
			return
		}
		cp.SourceNext[p] = rec.Offset + 1
		if rec.Attrs.IsControl() {
			return
		}
		out = append(out, &kgo.Record{
			Topic: r.m.Dest, Partition: r.destPartition(rec),
			Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp,
		})
	})
	if slices.Equal(cp.SourceNext, last.SourceNext) {
		return nil
	}
	if err := r.transact(ctx, func() error {
		if len(out) > 0 {
			if err := r.tx.ProduceSync(ctx, out...).FirstErr(); err != nil {
				return fmt.Errorf("copying to %s: %w", r.m.Dest, err)
			}
			for _, o := range out {
				cp.DestNext[o.Partition] = max(cp.DestNext[o.Partition], o.Offset+1)
			}
		}
		return r.produceState(ctx, checkpointKey(r.m.Source, cp.Seq), cp)
	}); err != nil {
		return err
	}
	r.cps = append(r.cps, cp)
	failpoint.Hit("migrate.copied")
	return nil
}

// destPartition is where rec goes in the destination.
func (r *run) destPartition(rec *kgo.Record) int32 {
	if rec.Key == nil {
		return rec.Partition % r.m.DestPartitions
	}
	return int32(r.hash.Partition(&kgo.Record{Key: rec.Key}, int(r.m.DestPartitions)))
}

// cutover seals the source and copies what is left. The source's leaders
// refuse produces once they have applied the seal, under the lock their
// appends hold, and say so in DescribePositions (v1) with their log end:
// once every leader says it, and its high watermark and last stable
// offset have reached that end (nothing in flight, no transaction open)
// and the copy has passed it, the source holds nothing more to copy.
func (r *run) cutover(ctx context.Context) error {
	dest := r.m.Dest
	resps, err := r.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: metadata.MigratedToConfig, Value: &dest}}, r.m.Source)
	if err == nil {
		var resp kadm.AlterConfigsResponse
		if resp, err = resps.On(r.m.Source, nil); err == nil {
			err = kafkaError(resp.Err, resp.ErrMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("sealing %s (setting %s): %w", r.m.Source, metadata.MigratedToConfig, err)
	}
	sealed := time.Now()
	r.log.Info("sealed the source; draining it", "source", r.m.Source)
	failpoint.Hit("migrate.sealed")
	for {
		done, err := r.drained(ctx)
		if err != nil {
			return err
		}
		if done {
			break
		}
		if err := r.copyChunk(ctx); err != nil {
			return err
		}
	}
	r.log.Info("drained the source", "source", r.m.Source, "took", time.Since(sealed))
	failpoint.Hit("migrate.drained")
	return r.setStep(ctx, StepOpening)
}

// drained asks the source's leaders whether the copy has everything.
func (r *run) drained(ctx context.Context) (bool, error) {
	topics, err := r.adm.ListTopics(ctx, r.m.Source)
	if err != nil {
		return false, err
	}
	td, ok := topics[r.m.Source]
	if !ok || td.Err != nil {
		return false, fmt.Errorf("looking up %s: %v", r.m.Source, td.Err)
	}
	if int32(len(td.Partitions)) != r.m.SourcePartitions {
		// Grown during the migration: the new partitions' records
		// were never copied, and the offset map has no place for them.
		return false, fmt.Errorf("%s has %d partitions now, %d when its migration began: a migration cannot take partitions added since (the source stays sealed until its %s is removed)",
			r.m.Source, len(td.Partitions), r.m.SourcePartitions, metadata.MigratedToConfig)
	}
	byLeader := map[int32][]int32{}
	for _, pd := range td.Partitions {
		if pd.Leader < 0 {
			return false, sleep(ctx, pollInterval) // an election: ask again
		}
		byLeader[pd.Leader] = append(byLeader[pd.Leader], pd.Partition)
	}
	next := r.cps[len(r.cps)-1].SourceNext
	r.behind = 0
	done := true
	for leader, parts := range byLeader {
		req := &fjordmsg.DescribePositionsRequest{Version: 1, Topics: []fjordmsg.DescribePositionsTopic{{Topic: r.m.Source}}}
		for _, p := range parts {
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, fjordmsg.DescribePositionsPartition{Partition: p})
		}
		kresp, err := r.cl.Broker(int(leader)).Request(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			done = false // the leader is unreachable or gone: ask again
			continue
		}
		resp := kresp.(*fjordmsg.DescribePositionsResponse)
		if resp.Version < 1 {
			return false, fmt.Errorf("broker %d answers DescribePositions v%d: the cutover needs v1 (a Fjord from before topic migration)", leader, resp.Version)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if int(p.Partition) >= len(next) {
					continue
				}
				if p.ErrorCode != 0 {
					if err := kerr.ErrorForCode(p.ErrorCode); !kerr.IsRetriable(err) {
						return false, fmt.Errorf("asking the leader of %s: %w", partitionString(r.m.Source, p.Partition), err)
					}
					done = false
					continue
				}
				r.behind += max(0, p.HighWatermark-next[p.Partition])
				if p.MigratedTo != r.m.Dest || p.HighWatermark != p.LogEndOffset || p.LastStableOffset != p.HighWatermark || next[p.Partition] < p.HighWatermark {
					done = false
				}
			}
		}
	}
	r.report(false)
	return done, nil
}

// openDest removes the destination's MigratingFromConfig: producers
// waiting on it (their produces answered LEADER_NOT_AVAILABLE and
// retried) get through.
func (r *run) openDest(ctx context.Context) error {
	resps, err := r.adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.DeleteConfig, Name: metadata.MigratingFromConfig}}, r.m.Dest)
	if err == nil {
		var resp kadm.AlterConfigsResponse
		if resp, err = resps.On(r.m.Dest, nil); err == nil {
			err = kafkaError(resp.Err, resp.ErrMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("opening %s (removing %s): %w", r.m.Dest, metadata.MigratingFromConfig, err)
	}
	r.log.Info("opened the destination to producers", "dest", r.m.Dest)
	failpoint.Hit("migrate.opened")
	return r.setStep(ctx, StepGroups)
}

// moveGroups commits, for every group with offsets on the source and
// none on the destination, the destination offsets its source offsets
// translate to (Translate), once the group is empty. It returns when
// every such group is moved.
func (r *run) moveGroups(ctx context.Context) error {
	for {
		listed, err := r.adm.ListGroups(ctx)
		if err != nil {
			return fmt.Errorf("listing groups: %w", err)
		}
		var groups []Group
		pending := 0
		for _, name := range listed.Groups() {
			g, err := r.moveGroup(ctx, name)
			if err != nil {
				return err
			}
			if g == nil {
				continue
			}
			groups = append(groups, *g)
			if !g.Moved {
				pending++
			}
		}
		r.groups = groups
		r.report(false)
		if pending == 0 {
			return r.setStep(ctx, StepDone)
		}
		if err := sleep(ctx, groupInterval); err != nil {
			return err
		}
	}
}

// moveGroup moves one group if it can; nil for a group with no offsets
// on the source.
func (r *run) moveGroup(ctx context.Context, name string) (*Group, error) {
	offs, err := r.adm.FetchOffsets(ctx, name)
	if err != nil {
		if errors.Is(err, kerr.GroupIDNotFound) || errors.Is(err, kerr.CoordinatorNotAvailable) || errors.Is(err, kerr.NotCoordinator) {
			return nil, nil // gone, or moving: the next round sees it
		}
		return nil, fmt.Errorf("fetching group %s's offsets: %w", name, err)
	}
	src, dst := offs[r.m.Source], offs[r.m.Dest]
	if len(src) == 0 {
		return nil, nil
	}
	g := &Group{Name: name, Moved: len(dst) > 0}
	if g.Moved {
		return g, nil
	}
	described, err := r.adm.DescribeGroups(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("describing group %s: %w", name, err)
	}
	d := described[name]
	g.State, g.Members = d.State, len(d.Members)
	if d.Err != nil || g.Members > 0 {
		return g, nil
	}
	committed := make([]int64, r.m.SourcePartitions)
	for p := range committed {
		committed[p] = -1
		if o, ok := src[int32(p)]; ok && o.Err == nil {
			committed[p] = o.At
		}
	}
	to := Translate(r.cps, committed)
	commit := kadm.Offsets{}
	for d, at := range to {
		commit.Add(kadm.Offset{Topic: r.m.Dest, Partition: int32(d), At: at, LeaderEpoch: -1})
	}
	resps, err := r.adm.CommitOffsets(ctx, name, commit)
	if err == nil {
		err = resps.Error()
	}
	switch {
	case errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress):
		return g, nil // a member joined since: the next round waits for it to leave
	case err != nil:
		return nil, fmt.Errorf("committing group %s's offsets on %s: %w", name, r.m.Dest, err)
	}
	r.log.Info("moved a group's offsets to the destination", "group", name, "dest", r.m.Dest, "offsets", to)
	failpoint.Hit("migrate.group")
	g.Moved = true
	return g, nil
}

// fetchError is the first error in fs that is not its poll's deadline.
func fetchError(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		if !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded) {
			if e.Topic == "" {
				return e.Err
			}
			return fmt.Errorf("partition %d: %w", e.Partition, e.Err)
		}
	}
	return nil
}
