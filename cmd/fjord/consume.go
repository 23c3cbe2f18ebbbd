package main

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type consumeOptions struct {
	clientOptions
	fromBeginning bool
	offset        int64 // negative: that many records before the end
	fromTime      string
	partition     int32
	maxMessages   int64
	format        string
	group         string
	onGap         string // --on-gap: "", onGapEarliest or onGapLatest
}

// The values of --on-gap: where a group member goes on in a partition
// whose committed offset is no longer in the log.
const (
	onGapEarliest = "earliest"
	onGapLatest   = "latest"
)

func newConsumeCommand() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records of a topic",
		Long: `Print the records of TOPIC, one per --format template, from every partition
(or only --partition), starting at the end (new records only), at the start
(--from-beginning), at --offset N, N records before the end of each partition
(--offset -N; from the start if the partition holds fewer, as kcat's -o -N),
or at the first record at or after a time (--from-time; the end if there is
none).

Without --group it reads the partitions directly and commits no offsets.
With --group G it consumes as a member of consumer group G: the group shares
the topic's partitions among its members, each member starts at the group's
committed offsets (where the group has none: at the start with
--from-beginning, else at the end), commits the offsets of what it has
printed every few seconds and on exit, and leaves the group on exit.
--partition, --offset and --from-time do not go with --group (move a group's
offsets with "fjord group reset-offsets").

A group's committed offset can fall out of the log: below its start, when
retention (retention.ms, retention.bytes) or DeleteRecords deleted records the
group had not read yet, or past its end, when the log lost records the group
had read. consume --group never moves past such a gap by itself: it stops,
exits non-zero, and names the partition, the committed offset, the log start
and the records lost, printing nothing more from that partition (what it
printed from the others is committed). --on-gap earliest goes on from the log
start (every record still in the log is printed), --on-gap latest from the
log end (the records still in the log are skipped too); either warns on
stderr with the same numbers and commits the new position.

Without --max-messages it runs until interrupted.

--format verbs: ` + formatHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			return runConsume(cmd, o, args[0])
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	addBoolFlag(f, &o.fromBeginning, "from-beginning", false, "start at the log start offset of each partition (with --group: of each partition the group has no offset for)")
	f.Var(newIntFlag(&o.offset, 0, -math.MaxInt64, math.MaxInt64, "(-N: N records before the end)"), "offset",
		"start at this offset in each partition read; -N: N records before each partition's end (also spelled --from-offset)")
	// --from-offset is --offset under the name that goes with
	// --from-beginning and --from-time: one flag, so that the two can
	// never disagree.
	f.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if name == "from-offset" {
			name = "offset"
		}
		return pflag.NormalizedName(name)
	})
	f.StringVar(&o.fromTime, "from-time", "", "start at the first record at or after this time: "+datetimeHelp)
	f.Var(newIntFlag(&o.partition, 0, 0, math.MaxInt32, ""), "partition", "read only this partition (default: all)")
	f.Var(newIntFlag(&o.maxMessages, 0, 0, math.MaxInt64, "(0: no limit)"), "max-messages", "exit after printing this many records")
	f.StringVar(&o.format, "format", `%v\n`, "output template per record")
	f.StringVar(&o.group, "group", "", "consume as a member of this consumer group, from its committed offsets, committing what is printed")
	f.Var(newEnumFlag(&o.onGap, "", onGapEarliest, onGapLatest), "on-gap",
		"with --group, where to go on when a committed offset is no longer in the log: earliest (the log start) or latest (the log end); without it consume stops there, naming the gap")
	return cmd
}

// checkGroupFlags refuses the flags that contradict --group: a member
// reads what the group assigns it, from where the group left off.
func checkGroupFlags(cmd *cobra.Command, o consumeOptions) error {
	switch {
	case o.group == "":
		return errors.New("--group is empty: give the consumer group's name")
	case cmd.Flags().Changed("partition"):
		return errors.New("--partition and --group exclude each other: a group member reads the partitions the group assigns it; " +
			"leave out --group to read one partition directly")
	case cmd.Flags().Changed("offset"):
		return errors.New("--offset and --group exclude each other: a group member starts at the group's committed offsets; " +
			"move them with \"fjord group reset-offsets\", or leave out --group to read from an offset directly")
	case cmd.Flags().Changed("from-time"):
		return errors.New("--from-time and --group exclude each other: a group member starts at the group's committed offsets; " +
			"move them with \"fjord group reset-offsets --to-datetime\", or leave out --group to read from a time directly")
	}
	return nil
}

func runConsume(cmd *cobra.Command, o consumeOptions, topic string) error {
	format, err := parseFormat(o.format)
	if err != nil {
		return err
	}
	grouped := cmd.Flags().Changed("group")
	if grouped {
		if err := checkGroupFlags(cmd, o); err != nil {
			return err
		}
	} else if cmd.Flags().Changed("on-gap") {
		return errors.New("--on-gap goes with --group: only a group member resumes from committed offsets that can fall out of the log; " +
			"without --group, consume starts where --from-beginning, --offset or --from-time says")
	}
	if given := givenFlags(cmd, "from-beginning", "offset", "from-time"); len(given) > 1 {
		return fmt.Errorf("%s exclude each other: give one", strings.Join(given, " and "))
	}
	var at time.Time
	if cmd.Flags().Changed("from-time") {
		if at, err = parseDatetime("--from-time", o.fromTime); err != nil {
			return err
		}
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	seeds, err := o.seeds()
	if err != nil {
		return err
	}
	admin, err := o.connect(ctx)
	if err != nil {
		return err
	}
	lookup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	adm := kadm.NewClient(admin)
	n, err := partitionCount(lookup, adm, topic)
	if err != nil {
		admin.Close()
		return err
	}
	printer := newRecordPrinter(cmd, format, o.maxMessages)
	if grouped {
		// The member resolves where a partition without a committed
		// offset starts through this client.
		defer admin.Close()
		return consumeInGroup(ctx, stop, o, topic, seeds, adm, printer)
	}
	var read []int32
	if cmd.Flags().Changed("partition") {
		if o.partition >= n {
			admin.Close()
			return fmt.Errorf("--partition %d: topic %s has %d partitions (0 to %d)", o.partition, topic, n, n-1)
		}
		read = []int32{o.partition}
	} else {
		for p := range n {
			read = append(read, p)
		}
	}
	var parts map[int32]kgo.Offset
	switch {
	case o.fromBeginning:
		parts = startEach(read, func(int32) kgo.Offset { return kgo.NewOffset().AtStart() })
	case cmd.Flags().Changed("offset"):
		parts, err = offsetStarts(lookup, adm, topic, read, o.offset)
	case cmd.Flags().Changed("from-time"):
		parts, err = timeStarts(lookup, adm, topic, read, at)
	default:
		parts = startEach(read, func(int32) kgo.Offset { return kgo.NewOffset().AtEnd() })
	}
	admin.Close()
	if err != nil {
		return err
	}

	base, err := o.baseOpts(seeds)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(base,
		kgo.ClientID("fjord-cli"),
		kgo.DialTimeout(reachTimeout),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()

	for !printer.done() {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break // interrupted
		}
		if err := printer.checkErrors(fetches); err != nil {
			return err
		}
		if _, err := printer.print(fetches); err != nil {
			return err
		}
	}
	return printer.finish()
}

// recordPrinter prints polled records and reports fetch errors: the part
// of consume that reading partitions directly and reading as a group
// member share.
type recordPrinter struct {
	out    *bufio.Writer
	stderr io.Writer
	format recordFormat
	max    int64 // --max-messages; 0: no limit
	count  int64
	buf    []byte
	// warned holds the last error printed per partition, so that each
	// distinct error is printed once: a retriable one comes back on
	// every poll until it clears.
	warned map[topicPartition]string
}

func newRecordPrinter(cmd *cobra.Command, format recordFormat, maxMessages int64) *recordPrinter {
	return &recordPrinter{
		out:    bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10),
		stderr: cmd.ErrOrStderr(),
		format: format,
		max:    maxMessages,
		warned: map[topicPartition]string{},
	}
}

// done says whether --max-messages records have been printed.
func (p *recordPrinter) done() bool { return p.max > 0 && p.count >= p.max }

// remaining is the most records the next poll should return (0: no
// limit), so that a group member is not handed records it will not print.
func (p *recordPrinter) remaining() int {
	if p.max == 0 {
		return 0
	}
	return int(min(p.max-p.count, math.MaxInt32))
}

// checkErrors prints each fetch error as a warning, once, and returns the
// first one that ends consumption.
func (p *recordPrinter) checkErrors(fetches kgo.Fetches) error {
	var fatal error
	fetches.EachError(func(t string, part int32, err error) {
		switch {
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrClientClosed):
			// Our own poll deadline or shutdown, not the cluster's.
		case errors.Is(err, kerr.UnknownTopicID):
			// The client stops fetching a partition whose topic id
			// changed and would report it on every poll.
			fatal = fmt.Errorf("topic %s was deleted or re-created while reading it (%v)", t, err)
		case t == "" && fatalGroupError(err):
			fatal = err
		case p.warned[topicPartition{t, part}] != err.Error():
			p.warned[topicPartition{t, part}] = err.Error()
			if t == "" {
				// A group session error: kgo rejoins by itself.
				fmt.Fprintf(p.stderr, "fjord: warning: %v\n", err)
			} else {
				fmt.Fprintf(p.stderr, "fjord: warning: %s-%d: %v\n", t, part, err)
			}
		}
	})
	return fatal
}

// fatalGroupError is an error of the group session that rejoining cannot
// cure; any other kgo retries with a new session.
func fatalGroupError(err error) bool {
	for _, e := range []error{kerr.InvalidGroupID, kerr.GroupAuthorizationFailed, kerr.InconsistentGroupProtocol,
		kerr.GroupMaxSizeReached, kerr.TopicAuthorizationFailed, kerr.UnsupportedVersion} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// print prints the fetched records, stopping at --max-messages, and
// returns those printed once they are flushed to the output: only those
// may be committed.
func (p *recordPrinter) print(fetches kgo.Fetches) ([]*kgo.Record, error) {
	var printed []*kgo.Record
	iter := fetches.RecordIter()
	for !iter.Done() && !p.done() {
		r := iter.Next()
		p.buf = p.format.appendRecord(p.buf[:0], r)
		if _, err := p.out.Write(p.buf); err != nil {
			return nil, err
		}
		p.count++
		printed = append(printed, r)
	}
	if err := p.out.Flush(); err != nil {
		return nil, err
	}
	return printed, nil
}

// finish flushes and writes the summary line.
func (p *recordPrinter) finish() error {
	if err := p.out.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(p.stderr, "consumed %s\n", plural(p.count, "record"))
	return nil
}

type topicPartition struct {
	topic     string
	partition int32
}

func startEach(parts []int32, at func(int32) kgo.Offset) map[int32]kgo.Offset {
	out := make(map[int32]kgo.Offset, len(parts))
	for _, p := range parts {
		out[p] = at(p)
	}
	return out
}

// listLog lists the log start and end offsets of topic's partitions.
func listLog(ctx context.Context, adm *kadm.Client, topic string) (starts, ends kadm.ListedOffsets, err error) {
	starts, err = adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err == nil {
		ends, err = adm.ListEndOffsets(ctx, topic)
	}
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing the offsets of %s: %w", topic, err)
	}
	return starts, ends, nil
}

// offsetStarts resolves --offset to an exact offset per partition read.
// An offset N outside [log start, log end] of any partition is refused,
// naming the range: the client would otherwise reset to wherever its
// policy says (franz-go: the start), printing records the user did not
// ask for. -N starts N records before each partition's end, or at its
// start if it holds fewer: "the last N records", as kcat's -o -N.
func offsetStarts(ctx context.Context, adm *kadm.Client, topic string, parts []int32, offset int64) (map[int32]kgo.Offset, error) {
	starts, ends, err := listLog(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]kgo.Offset, len(parts))
	for _, p := range parts {
		s, _ := starts.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		switch {
		case offset < 0:
			// offset >= -MaxInt64 (the flag's range), so -offset fits.
			out[p] = kgo.NewOffset().At(max(s.Offset, e.Offset-min(-offset, e.Offset)))
		case offset < s.Offset || offset > e.Offset:
			return nil, fmt.Errorf("--offset %d is outside partition %s-%d (allowed: %d, its log start, to %d, its log end; -N: N records before the end)",
				offset, topic, p, s.Offset, e.Offset)
		default:
			out[p] = kgo.NewOffset().At(offset)
		}
	}
	return out, nil
}

// timeStarts resolves --from-time to the first offset at or after it in
// each partition read, or the log end where there is none.
func timeStarts(ctx context.Context, adm *kadm.Client, topic string, parts []int32, at time.Time) (map[int32]kgo.Offset, error) {
	listed, err := adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("listing the offsets of %s at %s: %w", topic, at.Format(time.RFC3339Nano), err)
	}
	_, ends, err := listLog(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]kgo.Offset, len(parts))
	for _, p := range parts {
		o, ok := listed.Lookup(topic, p)
		if !ok || o.Offset < 0 {
			e, _ := ends.Lookup(topic, p)
			o.Offset = e.Offset
		}
		out[p] = kgo.NewOffset().At(o.Offset)
	}
	return out, nil
}

// groupCommitInterval is how often a group member commits what it has
// printed while it runs: Kafka's auto.commit.interval.ms default.
const groupCommitInterval = 5 * time.Second

// groupMember is what consume --group keeps across polls: the offsets it
// owes the group.
//
// Offsets are committed by hand rather than by kgo's autocommit because
// a partition the group has no offset for must be committed where
// consumption started even if nothing was printed from it (as Kafka's
// console consumer does). Otherwise a group that printed nothing from a
// partition before exiting would start at the end again next time and
// skip the records produced in between.
//
// Threads: the poll loop prints and commits. kgo's group goroutine calls
// startAt when a session fetches offsets, concurrently with the loop, and
// onRevoked and onLost, which BlockRebalanceOnPoll keeps from running
// between a poll and the loop's AllowRebalance, so never concurrently
// with printing or the loop's commits.
type groupMember struct {
	group, topic  string
	adm           *kadm.Client
	fromBeginning bool
	onGap         string // --on-gap
	stderr        io.Writer

	mu struct {
		sync.Mutex
		// uncommitted maps each partition owned whose commit is behind
		// to the offset to commit: just past the last record printed,
		// or where consumption started when the group had none.
		uncommitted map[int32]kgo.EpochOffset
	}
}

// consumeInGroup is consume --group. stop ends the handling of SIGINT
// and SIGTERM that cancels ctx.
func consumeInGroup(ctx context.Context, stop func(), o consumeOptions, topic string, seeds []string, adm *kadm.Client, printer *recordPrinter) error {
	m := &groupMember{group: o.group, topic: topic, adm: adm, fromBeginning: o.fromBeginning, onGap: o.onGap, stderr: printer.stderr}
	m.mu.uncommitted = map[int32]kgo.EpochOffset{}
	// Where a partition without a committed offset starts. startAt
	// resolves it to an exact offset before the first fetch.
	start := kgo.NewOffset().AtEnd()
	if o.fromBeginning {
		start = kgo.NewOffset().AtStart()
	}
	base, err := o.baseOpts(seeds)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(base,
		kgo.ClientID("fjord-cli"),
		kgo.DialTimeout(reachTimeout),
		kgo.ConsumerGroup(o.group),
		kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeStartOffset(start),
		// A position outside the log (a committed offset that
		// retention overtook) is reported as OFFSET_OUT_OF_RANGE for
		// its partition and never moved by the client: kgo's reset
		// would skip the lost records, and with AtEnd the retained
		// ones too, without a word. checkGaps decides instead.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.DisableAutoCommit(),
		// Records of a partition being revoked are printed before the
		// revoke commits them, never after: no record is printed by
		// two members unless one of them dies.
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(m.startAt),
		kgo.OnPartitionsRevoked(m.onRevoked),
		kgo.OnPartitionsLost(m.onLost),
	)...)
	if err != nil {
		return err
	}

	var loopErr error
	nextCommit := time.Now().Add(groupCommitInterval)
	for {
		// The deadline wakes an idle poll to commit periodically.
		pollCtx, cancel := context.WithDeadline(ctx, nextCommit)
		fetches := cl.PollRecords(pollCtx, printer.remaining())
		cancel()
		if ctx.Err() != nil {
			break // interrupted
		}
		// Gaps first: a partition out of range has no records in this
		// poll, and nothing more of it may be printed until it is
		// decided. checkGaps clears the errors it decided, so that
		// checkErrors does not warn of them again.
		if loopErr = m.checkGaps(ctx, cl, fetches); loopErr != nil {
			if ctx.Err() != nil {
				loopErr = nil // interrupted while looking the gap up
			}
			break
		}
		if loopErr = printer.checkErrors(fetches); loopErr != nil {
			break
		}
		printed, err := printer.print(fetches)
		m.printed(printed)
		if loopErr = err; loopErr != nil || printer.done() {
			break
		}
		if !time.Now().Before(nextCommit) {
			if err := m.commit(ctx, cl); err != nil && ctx.Err() == nil {
				fmt.Fprintf(m.stderr, "fjord: warning: committing offsets to group %s (retried in %v): %v\n", o.group, groupCommitInterval, err)
			}
			nextCommit = time.Now().Add(groupCommitInterval)
		}
		cl.AllowRebalance()
	}

	// The commit outlives an interrupt, but a second one exits at once
	// without it (the signal's default action), for a node that does
	// not answer.
	stop()
	// Rebalances are still blocked, so every partition printed from is
	// still ours to commit.
	commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	commitErr := m.commit(commitCtx, cl)
	cl.AllowRebalance()
	// Close leaves the group, so that its partitions move to the other
	// members now rather than after the session timeout.
	cl.Close()
	switch {
	case loopErr != nil:
		return loopErr
	case commitErr != nil:
		return fmt.Errorf("committing the offsets of the records printed to group %q: %w", o.group, commitErr)
	}
	return printer.finish()
}

// startAt resolves where each partition the group has no offset for
// starts (the log start with --from-beginning, else the log end) to an
// exact offset, and owes the group a commit of it.
// (kgo.AdjustFetchOffsetsFn)
func (m *groupMember) startAt(ctx context.Context, offsets map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var missing []int32
	for p, o := range offsets[m.topic] {
		// kgo puts the start offset (ConsumeStartOffset), a negative
		// sentinel, where the group has no commit.
		if o.EpochOffset().Offset < 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return offsets, nil
	}
	list := m.adm.ListEndOffsets
	if m.fromBeginning {
		list = m.adm.ListStartOffsets
	}
	listed, err := list(ctx, m.topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		// kgo ends the session and joins again.
		return nil, fmt.Errorf("listing where partitions of %s without a committed offset start: %w", m.topic, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range missing {
		l, ok := listed.Lookup(m.topic, p)
		if !ok {
			return nil, fmt.Errorf("listing where %s-%d starts: no answer for the partition", m.topic, p)
		}
		offsets[m.topic][p] = kgo.NewOffset().At(l.Offset)
		m.mu.uncommitted[p] = kgo.EpochOffset{Epoch: -1, Offset: l.Offset}
	}
	return offsets, nil
}

// printed records that the group is owed a commit past each record.
func (m *groupMember) printed(records []*kgo.Record) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range records {
		m.mu.uncommitted[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
	}
}

// commit commits what the group is owed, synchronously.
// REQUIRES: not called concurrently with itself; the poll loop and the
// revoke callback are kept apart by BlockRebalanceOnPoll.
func (m *groupMember) commit(ctx context.Context, cl *kgo.Client) error {
	m.mu.Lock()
	owed := maps.Clone(m.mu.uncommitted)
	m.mu.Unlock()
	if len(owed) == 0 {
		return nil
	}
	var firstErr error
	cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{m.topic: owed},
		func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err != nil {
				firstErr = err
				return
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						if firstErr == nil {
							firstErr = fmt.Errorf("%s-%d: %w", m.topic, p.Partition, err)
						}
						continue
					}
					// A record printed since the snapshot keeps the
					// partition owed.
					if m.mu.uncommitted[p.Partition] == owed[p.Partition] {
						delete(m.mu.uncommitted, p.Partition)
					}
				}
			}
		})
	return firstErr
}

// onRevoked hands revoked partitions over at the offsets printed, so that
// the next owner neither skips nor repeats records. kgo also calls it
// with every partition when the member leaves the group.
// (kgo.OnPartitionsRevoked)
func (m *groupMember) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if err := m.commit(ctx, cl); err != nil {
		fmt.Fprintf(m.stderr, "fjord: warning: committing offsets to group %s before giving up partitions: %v\n", m.group, err)
	}
	m.forget(revoked)
}

// onLost drops what is owed for partitions lost without a revoke (the
// session expired, say): the group no longer takes this member's
// commits, and the next owner re-reads from the last commit.
// (kgo.OnPartitionsLost)
func (m *groupMember) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	m.forget(lost)
}

func (m *groupMember) forget(partitions map[string][]int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range partitions[m.topic] {
		delete(m.mu.uncommitted, p)
	}
}

// logGap is a partition whose position is outside its log: the leader
// answered OFFSET_OUT_OF_RANGE, which NoResetOffset makes kgo report
// rather than move the position.
type logGap struct {
	partition int32
	// committed is the group's position in the partition: the offset
	// the member owes the group (past the last record it printed, or
	// where it started), or else the group's committed offset. The
	// offset owed is committed on exit, so either way it is where the
	// group's next member starts.
	committed int64
	// start and end are the log start and end offsets, listed after
	// the error.
	start, end int64
}

// lost is the number of records that went before the group read them:
// between the committed offset and the log start. 0 for a position past
// the log end.
func (g logGap) lost() int64 { return max(g.start-g.committed, 0) }

// describe names the gap with its numbers.
func (g logGap) describe(topic string) string {
	if g.committed > g.end {
		// The log lost records it had served: an unclean leader
		// election, or a topic re-created under the same name.
		return fmt.Sprintf("%s-%d: committed offset %d is past the log end %d: the log no longer holds %s the group read",
			topic, g.partition, g.committed, g.end, plural(g.committed-g.end, "record"))
	}
	return fmt.Sprintf("%s-%d: committed offset %d is below the log start %d: %s lost, deleted (by retention or DeleteRecords) before the group read them",
		topic, g.partition, g.committed, g.start, plural(g.lost(), "record"))
}

// checkGaps looks up each partition of fetches that is out of range and,
// without --on-gap, returns an error naming the gaps; nothing more is
// printed from them, and kgo would only repeat the error. With --on-gap it
// moves each to the log start or end, warns with the numbers and owes the
// group a commit of the new position. It clears the errors it decided.
//
// A partition whose position is back inside the log by the time it is
// looked up (the log grew past a position it had lost) is left alone:
// kgo fetches it again from the same position, and checkErrors warns.
//
// REQUIRES: called from the poll loop before AllowRebalance, so that the
// partitions are still this member's (SetOffsets' rule).
func (m *groupMember) checkGaps(ctx context.Context, cl *kgo.Client, fetches kgo.Fetches) error {
	var out []*kgo.FetchPartition
	for i := range fetches {
		for j := range fetches[i].Topics {
			t := &fetches[i].Topics[j]
			for k := range t.Partitions {
				if t.Topic == m.topic && errors.Is(t.Partitions[k].Err, kerr.OffsetOutOfRange) {
					out = append(out, &t.Partitions[k])
				}
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	lookup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	gaps, err := m.lookUpGaps(lookup, out)
	if err != nil {
		return err
	}
	if len(gaps) == 0 {
		return nil
	}
	moved, warnings, err := decideGaps(m.group, m.topic, m.onGap, gaps)
	if err != nil {
		return err
	}
	for _, w := range warnings {
		fmt.Fprintf(m.stderr, "fjord: warning: %s\n", w)
	}
	cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{m.topic: moved})
	m.mu.Lock()
	defer m.mu.Unlock()
	// The group is owed the new position even if nothing is printed
	// from it before exit: otherwise the next run meets the same gap.
	maps.Copy(m.mu.uncommitted, moved)
	return nil
}

// decideGaps is what consume --group does about gaps (sorted by
// partition): without --on-gap (onGap ""), the error that stops it;
// with --on-gap, the offset each partition goes on from and a warning
// for each gap.
func decideGaps(group, topic, onGap string, gaps []logGap) (moved map[int32]kgo.EpochOffset, warnings []string, err error) {
	descriptions := make([]string, len(gaps))
	for i, g := range gaps {
		descriptions[i] = g.describe(topic)
	}
	if onGap == "" {
		where, partitions := fmt.Sprintf("%s-%d", topic, gaps[0].partition), fmt.Sprint(gaps[0].partition)
		if len(gaps) > 1 {
			where = "those partitions"
			for _, g := range gaps[1:] {
				partitions += fmt.Sprintf(",%d", g.partition)
			}
		}
		return nil, nil, fmt.Errorf("gap in the log for group %s: %s; nothing more is printed from %s: go on with --on-gap earliest (from the log start) or --on-gap latest (from the log end), "+
			"or move the group with \"fjord group reset-offsets %s --topic %s:%s --to-earliest --execute\" (or --to-latest)",
			group, strings.Join(descriptions, "; "), where, group, topic, partitions)
	}
	moved = map[int32]kgo.EpochOffset{}
	for i, g := range gaps {
		to, what := g.start, "the log start"
		if onGap == onGapLatest {
			to, what = g.end, "the log end"
			if g.committed < g.start && g.end > g.start {
				// Say it plainly: latest skips more than the gap.
				what += fmt.Sprintf(", skipping also the %s still in the log (offsets %d to %d)", plural(g.end-g.start, "record"), g.start, g.end-1)
			}
		}
		warnings = append(warnings, fmt.Sprintf("gap in the log for group %s: %s; --on-gap %s: going on from offset %d, %s", group, descriptions[i], onGap, to, what))
		// Epoch -1: no record at the new position has been read, so
		// there is no epoch to validate against.
		moved[g.partition] = kgo.EpochOffset{Epoch: -1, Offset: to}
	}
	return moved, warnings, nil
}

// lookUpGaps finds, for each partition kgo reported out of range, the
// group's position and the log's bounds, and clears the error of those
// that are outside the log. Gaps are sorted by partition.
func (m *groupMember) lookUpGaps(ctx context.Context, out []*kgo.FetchPartition) ([]logGap, error) {
	m.mu.Lock()
	owed := maps.Clone(m.mu.uncommitted)
	m.mu.Unlock()
	// Where the member owes nothing, its position is the group's
	// committed offset: ask the coordinator, once for all partitions.
	var committed kadm.OffsetResponses
	if slices.ContainsFunc(out, func(p *kgo.FetchPartition) bool { _, ok := owed[p.Partition]; return !ok }) {
		var err error
		if committed, err = m.adm.FetchOffsets(ctx, m.group); err == nil {
			err = committed.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("%s-%d is out of range for group %s, and fetching the group's committed offsets failed: %w", m.topic, out[0].Partition, m.group, err)
		}
	}
	starts, ends, err := listLog(ctx, m.adm, m.topic)
	if err != nil {
		return nil, fmt.Errorf("%s-%d is out of range for group %s: %w", m.topic, out[0].Partition, m.group, err)
	}
	var gaps []logGap
	for _, p := range out {
		g := logGap{partition: p.Partition}
		if o, ok := owed[p.Partition]; ok {
			g.committed = o.Offset
		} else if c, ok := committed.Lookup(m.topic, p.Partition); ok && c.At >= 0 {
			g.committed = c.At
		} else {
			// startAt owes a commit for every partition without one,
			// so the position is always one of the two.
			return nil, fmt.Errorf("%s-%d is out of range for group %s, which has no committed offset for it", m.topic, p.Partition, m.group)
		}
		s, _ := starts.Lookup(m.topic, p.Partition)
		e, _ := ends.Lookup(m.topic, p.Partition)
		g.start, g.end = s.Offset, e.Offset
		if g.committed >= g.start && g.committed <= g.end {
			continue
		}
		p.Err = nil
		gaps = append(gaps, g)
	}
	slices.SortFunc(gaps, func(a, b logGap) int { return cmp.Compare(a.partition, b.partition) })
	return gaps, nil
}
