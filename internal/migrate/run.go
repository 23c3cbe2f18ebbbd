package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/failpoint"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Config is one run of a migration.
type Config struct {
	// Opts are the options every client of the run starts from: the
	// seed brokers, client id and security, and fjordmsg.ClientOpts
	// (the run asks the source's leaders DescribePositions v1).
	Opts []kgo.Opt
	// Source and Dest name the topics.
	Source, Dest string
	// Partitions is the destination's partition count. A run that
	// resumes a migration may leave it 0 (the recorded count); any
	// other value must be the recorded one.
	Partitions int32
	// Cutover makes the run go on, once the copy has caught up, to seal
	// the source, drain it, open the destination and move the groups.
	// Without it the run stops once the copy has caught up, and a later
	// run continues from there. A migration whose cutover has begun
	// always finishes it.
	Cutover bool
	// Progress, when set, is told where the run stands: at each step
	// and about once a second while copying and moving groups. It is
	// called from the run's goroutine.
	Progress func(Progress)
	// Logger receives the run's steps; nil discards.
	Logger *slog.Logger
}

// Progress is where a run stands.
type Progress struct {
	Migration Migration
	// Copied is how many source offsets lie below the copy's position,
	// summed over partitions (records, and transaction markers and
	// aborted records, which take offsets but are not copied); Behind
	// is how many lie between it and the source's last stable offset,
	// as last asked.
	Copied, Behind int64
	// Groups are the groups with offsets on the source, during
	// StepGroups.
	Groups []Group
}

// Group is one consumer group's move from the source to the
// destination.
type Group struct {
	Name string
	// Moved: the group has committed offsets on the destination (the
	// run committed them, or the group has consumed there since).
	Moved bool
	// Members is how many members the group had when last asked: a
	// group is moved once it has none, since Kafka takes offsets from
	// outside a group only while it is empty. Its consumers read the
	// source to its end (final once the cutover has sealed it), commit,
	// and stop; they start again on the destination.
	Members int
	State   string
}

// Timing of the loops. The copy's fetch wait bounds how long the
// cutover's drain waits for a record that is already there; the
// positions and groups are asked at pollInterval.
const (
	fetchMaxWait     = 100 * time.Millisecond
	pollInterval     = 100 * time.Millisecond
	groupInterval    = 500 * time.Millisecond
	progressInterval = time.Second
	// maxChunkRecords bounds one copy transaction.
	maxChunkRecords = 10000
	// txnTimeout bounds how long a dead run's open transaction holds
	// back the destination's and StateTopic's last stable offset, when
	// no new run fences it sooner.
	txnTimeout = 10 * time.Second
	// stateReplicas is StateTopic's replication factor, where the
	// cluster has that many brokers.
	stateReplicas = 3
)

// Run runs a migration from its recorded step (or from the start) as far
// as cfg asks, and returns where it stands. It is safe to run again
// after it failed or its process died at any point: each step is
// recorded before its work starts, and the copy writes each chunk of
// records in one transaction with the checkpoint that records it, so a
// chunk is in the destination exactly once.
func Run(ctx context.Context, cfg Config) (Progress, error) {
	r, err := start(ctx, cfg)
	if err != nil {
		return Progress{}, err
	}
	defer r.close()
	err = r.run(ctx)
	return r.progress(), err
}

// run is one Run's clients and state.
type run struct {
	cfg  Config
	log  *slog.Logger
	cl   *kgo.Client // metadata, admin, DescribePositions
	adm  *kadm.Client
	tx   *kgo.Client // the transactional producer: destination and StateTopic
	src  *kgo.Client // the source's reader, once copying
	m    Migration
	cps  []Checkpoint
	hash kgo.TopicPartitioner
	// behind and groups are for Progress.
	behind     int64
	groups     []Group
	lastReport time.Time
}

func start(ctx context.Context, cfg Config) (*run, error) {
	if err := checkNames(cfg); err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if r.cl, err = kgo.NewClient(cfg.Opts...); err != nil {
		return nil, err
	}
	r.adm = kadm.NewClient(r.cl)
	if err := r.ensureStateTopic(ctx); err != nil {
		r.close()
		return nil, err
	}
	r.tx, err = kgo.NewClient(append(slices.Clone(cfg.Opts),
		kgo.TransactionalID(metadata.MigrationTransactionalID(cfg.Source)),
		kgo.TransactionTimeout(txnTimeout),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
		// Retried through a fenced run's abort (CONCURRENT_TRANSACTIONS)
		// and a leader moving; the request timeout still bounds each.
		kgo.RequestRetries(30),
	)...)
	if err != nil {
		r.close()
		return nil, err
	}
	// The producer id first (Java's initTransactions): it fences a run
	// this one replaces, whose open transaction the coordinator then
	// aborts, before the state is read.
	if _, _, err := r.tx.ProducerID(ctx); err != nil {
		r.close()
		return nil, fmt.Errorf("starting the migration's transactional producer %s: %w", metadata.MigrationTransactionalID(cfg.Source), err)
	}
	r.hash = kgo.StickyKeyPartitioner(nil).ForTopic(cfg.Dest)
	return r, nil
}

func (r *run) close() {
	for _, cl := range []*kgo.Client{r.src, r.tx, r.cl} {
		if cl != nil {
			cl.Close()
		}
	}
}

// checkNames refuses what no migration can be, before anything is
// asked of the cluster.
func checkNames(cfg Config) error {
	for _, name := range []string{cfg.Source, cfg.Dest} {
		if err := metadata.ValidateTopicName(name); err != nil {
			return err
		}
		if metadata.IsInternalTopic(name) || name == StateTopic {
			return fmt.Errorf("topic %q is internal to Fjord and cannot be migrated or migrated to", name)
		}
	}
	switch {
	case cfg.Source == cfg.Dest:
		return fmt.Errorf("the destination is the source (%s): name a new topic", cfg.Source)
	case cfg.Partitions < 0:
		return fmt.Errorf("--partitions %d: want at least 1", cfg.Partitions)
	}
	return nil
}

func (r *run) run(ctx context.Context) error {
	all, err := r.loadState(ctx)
	if err != nil {
		return err
	}
	st := all[r.cfg.Source]
	if st == nil || st.migration == nil {
		if err := r.begin(ctx); err != nil {
			return err
		}
	} else {
		if err := r.resume(st); err != nil {
			return err
		}
	}
	r.report(true)
	for {
		var err error
		switch r.m.Step {
		case StepCreating:
			err = r.createDest(ctx)
		case StepCopying:
			if err = r.copyUntilCaughtUp(ctx); err == nil {
				if !r.cfg.Cutover {
					return nil
				}
				err = r.setStep(ctx, StepCutover)
			}
		case StepCutover:
			err = r.cutover(ctx)
		case StepOpening:
			err = r.openDest(ctx)
		case StepGroups:
			err = r.moveGroups(ctx)
		case StepDone:
			return nil
		}
		if err != nil {
			return err
		}
		r.report(true)
	}
}

// resume checks that the recorded migration is the one asked for.
func (r *run) resume(st *states) error {
	m := *st.migration
	switch {
	case m.Dest != r.cfg.Dest:
		return fmt.Errorf("%s is being migrated to %s (step %s), not to %s: finish that one (fjord topic migrate %s %s --cutover)",
			m.Source, m.Dest, m.Step, r.cfg.Dest, m.Source, m.Dest)
	case r.cfg.Partitions != 0 && r.cfg.Partitions != m.DestPartitions:
		return fmt.Errorf("the migration of %s to %s was started with --partitions %d, not %d",
			m.Source, m.Dest, m.DestPartitions, r.cfg.Partitions)
	}
	r.m = m
	if m.Step == StepCreating {
		return nil // the checkpoints start with the destination
	}
	cps, err := st.chain()
	if err != nil {
		return err
	}
	if len(cps) == 0 {
		return fmt.Errorf("migrate: the state of %s's migration at step %s has no checkpoint", m.Source, m.Step)
	}
	r.cps = cps
	r.log.Info("resuming a migration", "source", m.Source, "dest", m.Dest, "step", m.Step, "checkpoint", cps[len(cps)-1].Seq)
	return nil
}

// begin checks a new migration against the cluster and records it.
// Nothing is created or changed when it refuses.
func (r *run) begin(ctx context.Context) error {
	topics, err := r.adm.ListTopics(ctx, r.cfg.Source, r.cfg.Dest)
	if err != nil {
		return fmt.Errorf("looking up %s and %s: %w", r.cfg.Source, r.cfg.Dest, err)
	}
	src, ok := topics[r.cfg.Source]
	if !ok || errors.Is(src.Err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("source topic %q does not exist", r.cfg.Source)
	}
	if src.Err != nil {
		return fmt.Errorf("looking up %s: %w", r.cfg.Source, src.Err)
	}
	if d, ok := topics[r.cfg.Dest]; ok && d.Err == nil {
		return fmt.Errorf("destination topic %q exists: a migration creates its destination, so that nothing but the copy is in it; name a new topic", r.cfg.Dest)
	}
	n := int32(len(src.Partitions))
	switch {
	case r.cfg.Partitions == 0:
		return fmt.Errorf("--partitions is required for a new migration (%s has %d)", r.cfg.Source, n)
	case r.cfg.Partitions < n:
		return fmt.Errorf("--partitions %d: %s has %d partitions, and a migration cannot merge them (keys from several source partitions would interleave in one); give at least %d",
			r.cfg.Partitions, r.cfg.Source, n, n)
	}
	configs, err := r.topicConfigs(ctx, r.cfg.Source)
	if err != nil {
		return err
	}
	if to := configs[metadata.MigratedToConfig]; to != "" {
		return fmt.Errorf("%s was migrated to %s already (its %s is set)", r.cfg.Source, to, metadata.MigratedToConfig)
	}
	if from := configs[metadata.MigratingFromConfig]; from != "" {
		return fmt.Errorf("%s is the destination of a migration from %s that has not finished: finish that one first", r.cfg.Source, from)
	}
	r.m = Migration{
		Source: r.cfg.Source, Dest: r.cfg.Dest,
		SourcePartitions: n, DestPartitions: r.cfg.Partitions,
		Step: StepCreating, StartedMs: time.Now().UnixMilli(),
	}
	return r.transact(ctx, func() error { return r.produceState(ctx, migrationKey(r.m.Source), r.m) })
}

// createDest creates the destination (closed to producers) with the
// source's replication factor and config overrides, and records the
// first checkpoint: the source's log start. A destination that exists
// already was created by this step in a run that died: it is kept when it
// is this migration's (its MigratingFromConfig names the source).
func (r *run) createDest(ctx context.Context) error {
	topics, err := r.adm.ListTopics(ctx, r.m.Source)
	if err != nil {
		return err
	}
	src, ok := topics[r.m.Source]
	if !ok || src.Err != nil || len(src.Partitions) == 0 {
		return fmt.Errorf("looking up %s: %v", r.m.Source, src.Err)
	}
	if int32(len(src.Partitions)) != r.m.SourcePartitions {
		return fmt.Errorf("%s has %d partitions now, %d when its migration began: start it again with a new destination", r.m.Source, len(src.Partitions), r.m.SourcePartitions)
	}
	configs, err := r.topicConfigs(ctx, r.m.Source)
	if err != nil {
		return err
	}
	delete(configs, metadata.MigratedToConfig)
	configs[metadata.MigratingFromConfig] = r.m.Source
	set := make(map[string]*string, len(configs))
	for k, v := range configs {
		set[k] = &v
	}
	rf := int16(len(src.Partitions[0].Replicas))
	resp, err := r.adm.CreateTopic(ctx, r.m.DestPartitions, rf, set, r.m.Dest)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		dst, err := r.topicConfigs(ctx, r.m.Dest)
		if err != nil {
			return err
		}
		if dst[metadata.MigratingFromConfig] != r.m.Source {
			return fmt.Errorf("destination topic %q was created by someone else since the migration began: delete it, or start again with a new destination", r.m.Dest)
		}
	case err != nil:
		return fmt.Errorf("creating %s: %w", r.m.Dest, kafkaError(err, resp.ErrMessage))
	}
	r.log.Info("created the destination", "dest", r.m.Dest, "partitions", r.m.DestPartitions)
	failpoint.Hit("migrate.created")

	starts, err := r.adm.ListStartOffsets(ctx, r.m.Source)
	if err != nil {
		return err
	}
	first := Checkpoint{SourceNext: make([]int64, r.m.SourcePartitions), DestNext: make([]int64, r.m.DestPartitions)}
	for p := range first.SourceNext {
		o, ok := starts.Lookup(r.m.Source, int32(p))
		if !ok || o.Err != nil {
			return fmt.Errorf("log start of %s-%d: %v", r.m.Source, p, o.Err)
		}
		first.SourceNext[p] = o.Offset
	}
	r.m.Step = StepCopying
	if err := r.transact(ctx, func() error {
		if err := r.produceState(ctx, checkpointKey(r.m.Source, 0), first); err != nil {
			return err
		}
		return r.produceState(ctx, migrationKey(r.m.Source), r.m)
	}); err != nil {
		return err
	}
	r.cps = []Checkpoint{first}
	return nil
}

// setStep records the migration's next step.
func (r *run) setStep(ctx context.Context, step Step) error {
	m := r.m
	m.Step = step
	if err := r.transact(ctx, func() error { return r.produceState(ctx, migrationKey(m.Source), m) }); err != nil {
		return err
	}
	r.m = m
	r.log.Info("migration step", "source", m.Source, "dest", m.Dest, "step", step)
	return nil
}

// topicConfigs returns a topic's config overrides (DescribeConfigs'
// DYNAMIC_TOPIC_CONFIG).
func (r *run) topicConfigs(ctx context.Context, topic string) (map[string]string, error) {
	var rc kadm.ResourceConfig
	err := retry(ctx, func() error {
		rcs, err := r.adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			return err
		}
		if rc, err = rcs.On(topic, nil); err == nil {
			err = rc.Err
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s's configs: %w", topic, err)
	}
	out := map[string]string{}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
			out[c.Key] = *c.Value
		}
	}
	return out, nil
}

// transact runs produce in one transaction and commits it.
func (r *run) transact(ctx context.Context, produce func() error) error {
	if err := r.tx.BeginTransaction(); err != nil {
		return err
	}
	if err := produce(); err != nil {
		// The abort is best effort: a run that starts next fences the
		// transaction in any case.
		_ = r.tx.EndTransaction(context.WithoutCancel(ctx), kgo.TryAbort)
		return err
	}
	failpoint.Hit("migrate.uncommitted")
	if err := r.tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("committing the migration's transaction: %w", err)
	}
	return nil
}

// produceState writes one state record and waits for it.
func (r *run) produceState(ctx context.Context, key []byte, v any) error {
	value, err := json.Marshal(v)
	if err != nil {
		return err
	}
	rec := &kgo.Record{Topic: StateTopic, Partition: 0, Key: key, Value: value}
	if err := r.tx.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("writing the migration's state to %s: %w", StateTopic, err)
	}
	return nil
}

// report tells cfg.Progress where the run stands, at most once a second
// unless now.
func (r *run) report(now bool) {
	if r.cfg.Progress == nil || !now && time.Since(r.lastReport) < progressInterval {
		return
	}
	r.lastReport = time.Now()
	r.cfg.Progress(r.progress())
}

func (r *run) progress() Progress {
	p := Progress{Migration: r.m, Behind: r.behind, Groups: slices.Clone(r.groups)}
	if len(r.cps) > 0 {
		for i, next := range r.cps[len(r.cps)-1].SourceNext {
			p.Copied += next - r.cps[0].SourceNext[i]
		}
	}
	return p
}

// kafkaError adds a broker's error message to err, when it sent one.
func kafkaError(err error, msg string) error {
	if msg == "" {
		return err
	}
	return fmt.Errorf("%w: %s", err, msg)
}

// partitionString names a partition for messages.
func partitionString(topic string, p int32) string { return topic + "-" + strconv.Itoa(int(p)) }

// retryFor bounds retry: long enough for every node to apply a topic
// just created (a node answers UNKNOWN_TOPIC_OR_PARTITION until its
// image has it) or a controller election.
const retryFor = 10 * time.Second

// retry calls fn until it returns nil or an error that is not
// retriable, for at most retryFor.
func retry(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(retryFor)
	for {
		err := fn()
		if err == nil || !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return err
		}
		if serr := sleep(ctx, pollInterval); serr != nil {
			return err
		}
	}
}

// sleep waits d, or returns ctx's error.
func sleep(ctx context.Context, d time.Duration) error {
	if !clock.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}
