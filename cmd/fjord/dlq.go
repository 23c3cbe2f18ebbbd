package main

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/poison"
)

// fjord dlq: the records a consumer group's poison policy, or `group
// resume --skip`, wrote to a dead-letter topic (poison.DeadLetter),
// listed with the origin their fjord.dlq.* headers name, and replayed to
// their origin topic once each.
//
// Both read a dead-letter topic from where they start to its end at the
// time of the call, read_committed, and know they are there by offsets:
// the reader keeps transaction markers (kgo.KeepControlRecords), so that
// under read_committed every offset below the last stable offset is
// either handed over or skipped as an aborted record followed by its
// marker, and the last one below it always arrives. (An aborted record
// whose marker is still above the last stable offset, with another
// transaction open on the topic in between, is the exception: Fjord's
// dead-letter writers are not transactional, and readIdleTimeout bounds
// the wait.)

const (
	// replayGroupPrefix names the consumer group of `dlq replay`, and
	// its transactional id: one per dead-letter topic, whatever --to
	// says, so that each record is replayed once across runs, and a run
	// fences an earlier one that died (or still runs) mid-transaction.
	replayGroupPrefix = "fjord-dlq-replay."
	// readIdleTimeout is how long a read waits for records it knows are
	// below the end before it gives up.
	readIdleTimeout = requestTimeout
)

func newDLQCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "List and replay the records of a dead-letter topic",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	cmd.AddCommand(newDLQListCommand(&o), newDLQReplayCommand(&o))
	return cmd
}

// dlqRun wraps a dlq subcommand: it reads FJORD_BROKERS and connects.
// Unlike clientRun it does not bound the whole call: a dead-letter topic
// is read to its end, however long that takes; each request, and each
// wait for records, is bounded instead.
func dlqRun(o *clientOptions, fn func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, adm *kadm.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.applyEnv(cmd); err != nil {
			return err
		}
		cl, err := o.connect(cmd.Context())
		if err != nil {
			return err
		}
		defer cl.Close()
		return fn(cmd.Context(), cmd, cl, newAdmin(cl), args)
	}
}

func newDLQListCommand(o *clientOptions) *cobra.Command {
	var (
		output     string
		maxRecords int64
	)
	cmd := &cobra.Command{
		Use:   "list TOPIC [--max N]",
		Short: "Show the records of a dead-letter topic, each with where it came from and why",
		Long: `Show the records of dead-letter topic TOPIC from its start to its end at the
time of the call (read_committed), by partition and offset: each one's own
partition and offset; its origin, as its fjord.dlq.* headers name it (the
topic, partition, offset and timestamp of the record that failed, the
consumer group, the reason and the attempts); its key, value and other
headers.

Keys, values and reasons print as text on one line (a backslash and every
byte that is not printable UTF-8 as \xHH), a missing one as -; headers as
"fjord consume --format %h" prints them. With -o json, keys and values are
text (null when missing or not UTF-8) and base64 (null when missing).`,
		Args: cobra.ExactArgs(1),
		RunE: dlqRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, adm *kadm.Client, args []string) error {
			l, err := listDeadLetters(ctx, cl, adm, args[0], maxRecords)
			if err != nil {
				return err
			}
			return printResult(cmd, output, l)
		}),
	}
	cmd.Flags().Var(newIntFlag(&maxRecords, 0, 0, math.MaxInt64, "(0: no limit)"), "max", "show at most this many records, the first by partition, then offset (0: all)")
	addOutputFlag(cmd, &output)
	return cmd
}

// dlqRange lists where reading topic starts (its log start offsets) and
// ends (its last stable offsets: read_committed's end), per partition.
func dlqRange(ctx context.Context, adm *kadm.Client, topic string) (starts, ends map[int32]int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if _, err := partitionCount(ctx, adm, topic); err != nil {
		return nil, nil, err
	}
	list := func(what string, fn func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
		l, err := fn(ctx, topic)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing the %s offsets of %s: %w", what, topic, err)
		}
		out := map[int32]int64{}
		l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out, nil
	}
	if starts, err = list("start", adm.ListStartOffsets); err != nil {
		return nil, nil, err
	}
	ends, err = list("last stable", adm.ListCommittedOffsets)
	return starts, ends, err
}

// readRange reads each partition of topic from from[p] to below to[p]
// (read_committed), handing each record (never a transaction marker) to
// each, partition by partition in offset order; each returns false to
// read no more of that record's partition. It returns once every
// partition is read, or ctx ends.
func readRange(ctx context.Context, cl *kgo.Client, topic string, from, to map[int32]int64, each func(*kgo.Record) bool) error {
	pending, start := map[int32]int64{}, map[int32]kgo.Offset{}
	for p, end := range to {
		if from[p] < end {
			pending[p], start[p] = end, kgo.NewOffset().At(from[p])
		}
	}
	if len(pending) == 0 {
		return nil
	}
	rd, err := kgo.NewClient(append(cl.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // their offsets count (see the top of the file)
	)...)
	if err != nil {
		return err
	}
	defer rd.Close()
	for len(pending) > 0 {
		pollCtx, cancel := context.WithTimeout(ctx, readIdleTimeout)
		fs := rd.PollFetches(pollCtx)
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fetchError(fs); err != nil {
			return fmt.Errorf("reading %s: %w", topic, err)
		}
		if fs.NumRecords() == 0 {
			return fmt.Errorf("reading %s: no records within %v from %s, which are not read to their end", topic, readIdleTimeout, partitionList(slices.Collect(maps.Keys(pending))))
		}
		var done []int32
		fs.EachRecord(func(r *kgo.Record) {
			end, ok := pending[r.Partition]
			if !ok || r.Offset >= end {
				return
			}
			more := r.Attrs.IsControl() || each(r)
			if !more || r.Offset+1 >= end {
				delete(pending, r.Partition)
				done = append(done, r.Partition)
			}
		})
		if len(done) > 0 {
			rd.PauseFetchPartitions(map[string][]int32{topic: done})
		}
	}
	return nil
}

// fetchError is the first error of fs that is not the poll's own end.
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

// partitionList is "partition 3" or "partitions 0, 2", sorted.
func partitionList(ps []int32) string {
	slices.Sort(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(int(p))
	}
	return pluralWord(len(ps), "partition") + " " + strings.Join(s, ", ")
}

func listDeadLetters(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, maxRecords int64) (*dlqList, error) {
	starts, ends, err := dlqRange(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	// --max keeps the first N by partition and offset: no partition
	// gives more than N of them, so each is read to N at most.
	var records []*kgo.Record
	perPartition := map[int32]int64{}
	err = readRange(ctx, cl, topic, starts, ends, func(r *kgo.Record) bool {
		records = append(records, r)
		perPartition[r.Partition]++
		return maxRecords == 0 || perPartition[r.Partition] < maxRecords
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(records, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	l := &dlqList{Topic: topic, Records: []deadLetterRecord{}}
	if maxRecords > 0 && int64(len(records)) >= maxRecords {
		records, l.limited = records[:maxRecords], true
	}
	for _, r := range records {
		l.Records = append(l.Records, deadLetterOf(r))
	}
	return l, nil
}

// dlqList is dlq list; its JSON is -o json.
type dlqList struct {
	Topic   string             `json:"topic"`
	Records []deadLetterRecord `json:"records"`
	limited bool               // --max cut the list
}

// deadLetterRecord is one record of a dead-letter topic. Keys, values
// and header values are given twice: as text, null when missing or not
// UTF-8, and as base64, null when missing.
type deadLetterRecord struct {
	Partition   int32         `json:"partition"`
	Offset      int64         `json:"offset"`
	TimestampMs int64         `json:"timestamp_ms"`
	Origin      *originRecord `json:"origin"` // null: no fjord.dlq.* origin headers
	Key         *string       `json:"key"`
	KeyB64      *string       `json:"key_b64"`
	Value       *string       `json:"value"`
	ValueB64    *string       `json:"value_b64"`
	// Headers are the record's other headers, in order: without the
	// fjord.dlq.* ones that Origin shows.
	Headers []recordHeader `json:"headers"`
	raw     *kgo.Record    // for the text
	others  []kgo.RecordHeader
}

// originRecord is where a dead letter came from (poison.Origin).
type originRecord struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	TimestampMs *int64 `json:"timestamp_ms"` // null: not in the headers
	Group       string `json:"group"`
	Reason      string `json:"reason"`
	Attempts    int32  `json:"attempts"`
}

type recordHeader struct {
	Key      string  `json:"key"`
	Value    *string `json:"value"`
	ValueB64 *string `json:"value_b64"`
}

// originHeaders are the headers poison.DeadLetter adds and OriginOf
// reads; fjord.dlq.replayed-from is not one of them: it says a record
// was replayed before, which list shows with the other headers.
var originHeaders = []string{poison.HeaderTopic, poison.HeaderPartition, poison.HeaderOffset, poison.HeaderTimestamp,
	poison.HeaderGroup, poison.HeaderReason, poison.HeaderAttempts}

func deadLetterOf(r *kgo.Record) deadLetterRecord {
	d := deadLetterRecord{Partition: r.Partition, Offset: r.Offset, TimestampMs: r.Timestamp.UnixMilli(), raw: r,
		Key: textOf(r.Key), KeyB64: base64Of(r.Key), Value: textOf(r.Value), ValueB64: base64Of(r.Value), Headers: []recordHeader{}}
	o, ok := poison.OriginOf(r)
	d.others = r.Headers
	if ok {
		d.Origin = &originRecord{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, Group: o.Group, Reason: o.Reason, Attempts: o.Attempts}
		if !o.Timestamp.IsZero() {
			ms := o.Timestamp.UnixMilli()
			d.Origin.TimestampMs = &ms
		}
		d.others = slices.DeleteFunc(slices.Clone(r.Headers), func(h kgo.RecordHeader) bool { return slices.Contains(originHeaders, h.Key) })
	}
	for _, h := range d.others {
		d.Headers = append(d.Headers, recordHeader{Key: h.Key, Value: textOf(h.Value), ValueB64: base64Of(h.Value)})
	}
	return d
}

// textOf is b as text, or nil when b is nil or not UTF-8.
func textOf(b []byte) *string {
	if b == nil || !utf8.Valid(b) {
		return nil
	}
	s := string(b)
	return &s
}

func base64Of(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

func (l *dlqList) printText(out io.Writer) error {
	for _, d := range l.Records {
		b := fmt.Appendf(nil, "%s partition %d offset %d\n", l.Topic, d.Partition, d.Offset)
		if o := d.Origin; o != nil {
			b = fmt.Appendf(b, "  origin:   %s partition %d offset %d", o.Topic, o.Partition, o.Offset)
			if o.TimestampMs != nil {
				b = fmt.Appendf(b, ", timestamp %s", formatMillis(*o.TimestampMs))
			}
			b = fmt.Appendf(b, "\n  group:    %s (%s)\n  reason:   ", o.Group, plural(int64(o.Attempts), "attempt"))
			b = append(appendPrintable(b, []byte(o.Reason)), '\n')
		} else {
			b = append(b, "  origin:   - (no fjord.dlq.* origin headers)\n"...)
		}
		b = append(appendOrDash(append(b, "  key:      "...), d.raw.Key), '\n')
		b = append(appendOrDash(append(b, "  value:    "...), d.raw.Value), '\n')
		b = append(b, "  headers:  "...)
		if len(d.others) == 0 {
			b = append(b, '-')
		}
		b = append(appendHeaders(b, d.others), "\n\n"...)
		if _, err := out.Write(b); err != nil {
			return err
		}
	}
	more := ""
	if l.limited {
		more = fmt.Sprintf(" (--max %d: more may follow)", len(l.Records))
	}
	_, err := fmt.Fprintf(out, "listed %s of %s%s\n", plural(int64(len(l.Records)), "record"), l.Topic, more)
	return err
}

// appendOrDash appends s as appendPrintable does, or "-" for nil.
func appendOrDash(b, s []byte) []byte {
	if s == nil {
		return append(b, '-')
	}
	return appendPrintable(b, s)
}

func newDLQReplayCommand(o *clientOptions) *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "replay TOPIC [--to SOURCE]",
		Short: "Write each record of a dead-letter topic back to its origin topic (or --to), once",
		Long: `Write each record of dead-letter topic TOPIC, up to its end at the time of the
call, back to the topic it came from (its fjord.dlq.topic header), or to --to:
its key, value, timestamp and headers, without the fjord.dlq.* ones and with
fjord.dlq.replayed-from set to TOPIC/PARTITION/OFFSET of the dead letter. A
record goes to the partition its key picks, as a producer's would.

Each record is replayed once, across runs and crashes: the command reads TOPIC
as consumer group ` + replayGroupPrefix + `TOPIC and writes each batch of records
and the group's new offsets in one transaction (transactional id
` + replayGroupPrefix + `TOPIC), so a second run replays only what was added since,
and a run that dies replays nothing twice. Copies of one origin record (a
dead-letter write repeated after a crash) are replayed once per run.

Nothing is written when a record to replay has no origin headers and --to is
not given, when an origin topic does not exist, or when --to is TOPIC itself.`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			return checkReplayTo(cmd, args[0], to)
		},
		RunE: dlqRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, adm *kadm.Client, args []string) error {
			if err := checkReplayTo(cmd, args[0], to); err != nil {
				return err
			}
			// An interrupt ends the run between transactions; a second
			// one, the process (the signal's default action).
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			go func() { <-ctx.Done(); stop() }()
			r := &replayer{dlq: args[0], to: to, group: replayGroupPrefix + args[0], cl: cl, adm: adm}
			return r.run(ctx, cmd.OutOrStdout())
		}),
	}
	cmd.Flags().StringVar(&to, "to", "", "replay every record to this topic instead of its origin topic")
	return cmd
}

func checkReplayTo(cmd *cobra.Command, dlq, to string) error {
	switch {
	case dlq == "":
		return errors.New("the dead-letter topic is empty: give its name")
	case !cmd.Flags().Changed("to"):
		return nil
	case to == "":
		return errors.New("--to is empty: give the topic to replay to, or leave --to out to replay each record to its origin topic")
	case to == dlq:
		return fmt.Errorf("--to %s is the dead-letter topic itself: its records would be read again by the next replay", to)
	}
	return nil
}

// replayer is one run of dlq replay.
//
// Threads: run's goroutine owns everything.
type replayer struct {
	dlq, to, group string // group is also the transactional id
	cl             *kgo.Client
	adm            *kadm.Client
	// ends are the dead-letter topic's last stable offsets when the run
	// started: it replays below them and stops there.
	ends map[int32]int64
	// at is, per partition, where the group's committed offset is, as
	// far as this run knows. Invariant: at[p] <= ends[p] once set by a
	// commit of this run (capCommit keeps it so).
	at map[int32]int64
	// seen are the origins this run has replayed (in committed
	// transactions), so that a second copy of one is not.
	seen       map[originKey]bool
	replayed   int
	duplicates int
}

type originKey struct {
	topic     string
	partition int32
	offset    int64
}

func (r *replayer) run(ctx context.Context, out io.Writer) error {
	if r.to != "" {
		lookup, cancel := context.WithTimeout(ctx, requestTimeout)
		_, err := partitionCount(lookup, r.adm, r.to)
		cancel()
		if err != nil {
			return err
		}
	}
	starts, ends, err := dlqRange(ctx, r.adm, r.dlq)
	if err != nil {
		return err
	}
	r.ends, r.at, r.seen = ends, map[int32]int64{}, map[originKey]bool{}
	committed, err := r.committed(ctx)
	if err != nil {
		return err
	}
	for p, end := range ends {
		// Below the log start, retention took the records: the group
		// starts at the log start (ConsumeResetOffset).
		r.at[p] = min(max(starts[p], committed[p]), end)
	}
	n, err := r.check(ctx)
	switch {
	case err != nil && ctx.Err() != nil:
		return errors.New("interrupted before replaying anything")
	case err != nil:
		return err
	}
	if n > 0 {
		err = r.transact(ctx)
	}
	switch {
	case err != nil && r.replayed > 0:
		return fmt.Errorf("%w (%s replayed before that; run again to go on)", err, plural(int64(r.replayed), "record"))
	case err != nil:
		return err
	}
	where := "to their origin topics"
	if r.to != "" {
		where = "to " + r.to
	}
	switch {
	case n == 0:
		fmt.Fprintf(out, "replayed 0 records of %s: nothing new (consumer group %s is at its end)\n", r.dlq, r.group)
	case ctx.Err() != nil:
		fmt.Fprintf(out, "replayed %s of %s %s before the interrupt; run again to replay the rest\n", plural(int64(r.replayed), "record"), r.dlq, where)
	default:
		fmt.Fprintf(out, "replayed %s of %s %s\n", plural(int64(r.replayed), "record"), r.dlq, where)
	}
	if r.duplicates > 0 {
		fmt.Fprintf(out, "skipped %s: dead-letter copies of records this run replayed already\n", plural(int64(r.duplicates), "duplicate"))
	}
	return nil
}

// committed fetches the group's committed offsets of the dead-letter
// topic's partitions (r.ends'). A run that died mid-transaction leaves
// its offsets pending (UNSTABLE_OFFSET_COMMIT under require_stable)
// until its transaction times out; starting a producer with the
// transactional id fences it and aborts the transaction at once, as the
// session would, but before anything is read: check must start where
// the group really is.
func (r *replayer) committed(ctx context.Context) (map[int32]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	fenced := false
	for {
		out, err := r.fetchOffsets(ctx)
		switch {
		case err == nil:
			return out, nil
		case !errors.Is(err, kerr.UnstableOffsetCommit):
			return nil, fmt.Errorf("fetching the offsets of consumer group %s: %w", r.group, err)
		case !fenced:
			if err := r.fence(ctx); err != nil {
				return nil, err
			}
			fenced = true
		case !clock.Sleep(ctx, 100*time.Millisecond): // the abort's markers are on their way
			return nil, fmt.Errorf("fetching the offsets of consumer group %s: an earlier replay's transaction is still open: %w", r.group, err)
		}
	}
}

// fetchOffsets asks for the group's committed offsets of r.ends'
// partitions, require_stable; -1 where none. The partitions are named:
// asked for all its offsets, a coordinator leaves out the partitions
// whose only offsets are pending (Kafka's does), so a dead run's
// first commit would go unseen. (kadm asks for all.)
func (r *replayer) fetchOffsets(ctx context.Context) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = r.group, true
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = r.dlq, slices.Sorted(maps.Keys(r.ends))
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return nil, err
	}
	// franz-go answers in the form of the version spoken: per group
	// (v8+) or at the top.
	code, topics := resp.ErrorCode, resp.Topics
	if len(resp.Groups) > 0 {
		code, topics = resp.Groups[0].ErrorCode, nil
		for _, t := range resp.Groups[0].Topics {
			ft := kmsg.OffsetFetchResponseTopic{Topic: t.Topic}
			for _, p := range t.Partitions {
				ft.Partitions = append(ft.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset, ErrorCode: p.ErrorCode})
			}
			topics = append(topics, ft)
		}
	}
	if err := kerr.ErrorForCode(code); err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, err
	}
	out := map[int32]int64{}
	for _, t := range topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err)
			}
			if t.Topic == r.dlq {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// fence starts a producer with the replay's transactional id and closes
// it: the coordinator aborts the open transaction of the earlier one.
func (r *replayer) fence(ctx context.Context) error {
	p, err := kgo.NewClient(append(r.cl.Opts(), kgo.TransactionalID(r.group))...)
	if err != nil {
		return err
	}
	defer p.Close()
	if _, _, err := p.ProducerID(ctx); err != nil {
		return fmt.Errorf("fencing an earlier replay of %s (transactional id %s): %w", r.dlq, r.group, err)
	}
	return nil
}

// check reads what the run will replay and refuses, before anything is
// written, records it could not: without origin headers and no --to,
// naming the dead-letter topic itself as origin, or of an origin topic
// that does not exist (a produce to it would wait for it, or create it).
// It returns how many records there are to replay.
func (r *replayer) check(ctx context.Context) (int, error) {
	var n, noOrigin, selfOrigin int
	origins := map[string]int{}
	err := readRange(ctx, r.cl, r.dlq, r.at, r.ends, func(rec *kgo.Record) bool {
		n++
		o, ok := poison.OriginOf(rec)
		switch {
		case r.to != "":
		case !ok:
			noOrigin++
		case o.Topic == r.dlq:
			selfOrigin++
		default:
			origins[o.Topic]++
		}
		return true
	})
	switch {
	case err != nil:
		return 0, err
	case noOrigin > 0:
		return 0, fmt.Errorf("%d of the %s of %s to replay have no origin headers (%s, %s, %s; not written by Fjord's dead-lettering): give --to TOPIC to replay them there; nothing replayed",
			noOrigin, plural(int64(n), "record"), r.dlq, poison.HeaderTopic, poison.HeaderPartition, poison.HeaderOffset)
	case selfOrigin > 0:
		return 0, fmt.Errorf("%s of %s name %s itself as their origin topic: give --to TOPIC to replay them elsewhere; nothing replayed",
			plural(int64(selfOrigin), "record"), r.dlq, r.dlq)
	case len(origins) == 0:
		return n, nil
	}
	names := slices.Sorted(maps.Keys(origins))
	lookup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	topics, err := r.adm.ListTopics(lookup, names...)
	if err != nil {
		return 0, fmt.Errorf("looking up the origin topics of %s: %w", r.dlq, err)
	}
	for _, name := range names {
		if d, ok := topics[name]; !ok || d.Err != nil {
			return 0, fmt.Errorf("the origin topic %q of %s of %s does not exist: create it, or give --to TOPIC to replay them elsewhere; nothing replayed",
				name, plural(int64(origins[name]), "record"), r.dlq)
		}
	}
	return n, nil
}

// done says whether the group has reached the ends in every partition.
func (r *replayer) done() bool {
	for p, end := range r.ends {
		if r.at[p] < end {
			return false
		}
	}
	return true
}

// pauseReached stops fetching the partitions at their end: what a
// fetch brings from them now is the next run's.
func (r *replayer) pauseReached(cl *kgo.Client) {
	var reached []int32
	for p, end := range r.ends {
		if r.at[p] >= end {
			reached = append(reached, p)
		}
	}
	if len(reached) > 0 {
		cl.PauseFetchPartitions(map[string][]int32{r.dlq: reached})
	}
}

// transact replays, a transaction per poll, until the group is at the
// ends or ctx ends (an interrupt: what was committed stays).
func (r *replayer) transact(ctx context.Context) error {
	s, err := kgo.NewGroupTransactSession(append(r.cl.Opts(),
		kgo.TransactionalID(r.group),
		kgo.ConsumerGroup(r.group),
		kgo.ConsumeTopics(r.dlq),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // their offsets count (see the top of the file)
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// The CLI's five retries end a transaction's requests too soon
		// while a fenced predecessor's abort completes
		// (CONCURRENT_TRANSACTIONS); RetryTimeout still bounds them.
		kgo.RequestRetries(20),
	)...)
	if err != nil {
		return err
	}
	defer s.Close() // leaves the group
	// The producer id first (Java's initTransactions): it fences an
	// earlier run before the group fetches its offsets, which would
	// otherwise wait for that run's transaction to time out.
	if _, _, err := s.Client().ProducerID(ctx); err != nil {
		return fmt.Errorf("starting the transactional producer %s: %w", r.group, err)
	}
	r.pauseReached(s.Client())
	for !r.done() && ctx.Err() == nil {
		pollCtx, cancel := context.WithTimeout(ctx, readIdleTimeout)
		fs := s.PollFetches(pollCtx)
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted between transactions
		}
		if err := fetchError(fs); err != nil {
			return fmt.Errorf("reading %s: %w", r.dlq, err)
		}
		if fs.NumRecords() == 0 {
			// Nothing came: another run may have replayed the rest
			// (the group gave it partitions); else the records are
			// not coming.
			committed, err := r.committed(ctx)
			if err != nil {
				return err
			}
			for p := range r.ends {
				r.at[p] = max(r.at[p], committed[p])
			}
			if !r.done() {
				return fmt.Errorf("reading %s: no records within %v, and consumer group %s is not at the end of %s", r.dlq, readIdleTimeout, r.group, partitionList(r.behind()))
			}
			return nil
		}
		if err := r.replayBatch(ctx, s, fs); err != nil {
			return err
		}
		r.pauseReached(s.Client())
	}
	return nil
}

func (r *replayer) behind() []int32 {
	var out []int32
	for p, end := range r.ends {
		if r.at[p] < end {
			out = append(out, p)
		}
	}
	return out
}

// replayBatch writes fs's records below the ends, and commits the
// group past them, in one transaction. Records at or past an end were
// written after the run started: they are left, and capCommit keeps the
// commit below them, for the next run (which checks them first).
func (r *replayer) replayBatch(ctx context.Context, s *kgo.GroupTransactSession, fs kgo.Fetches) error {
	// Not ctx: an interrupt must not cut a transaction in two (End's
	// doc); requestTimeout bounds it instead.
	work, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	if err := s.Begin(); err != nil {
		return fmt.Errorf("beginning a transaction: %w", err)
	}
	var (
		out    []*kgo.Record
		seen   = map[originKey]bool{}
		dups   int
		at     = map[int32]int64{}
		recErr error
	)
	fs.EachRecord(func(rec *kgo.Record) {
		end, ok := r.ends[rec.Partition]
		if !ok {
			return // a partition added since the start: the next run's
		}
		// A record at or past the end still says everything below it
		// was read.
		at[rec.Partition] = min(rec.Offset+1, end)
		if rec.Offset >= end || rec.Attrs.IsControl() {
			return
		}
		o, hasOrigin := poison.OriginOf(rec)
		if hasOrigin {
			k := originKey{o.Topic, o.Partition, o.Offset}
			if r.seen[k] || seen[k] {
				dups++
				return
			}
			seen[k] = true
		}
		to := r.to
		if to == "" {
			to = o.Topic
		}
		if to == "" && recErr == nil {
			// check saw every record below the ends: only a record
			// that was not there then can get here.
			recErr = fmt.Errorf("the record at %s partition %d offset %d has no origin headers; give --to TOPIC", r.dlq, rec.Partition, rec.Offset)
		}
		out = append(out, replayRecord(rec, r.dlq, to))
	})
	var produceErr error
	if recErr == nil && len(out) > 0 {
		produceErr = s.ProduceSync(work, out...).FirstErr()
	}
	committed, err := s.End(kgo.PreTxnCommitFnContext(work, r.capCommit), kgo.TransactionEndTry(recErr == nil && produceErr == nil))
	switch {
	case err != nil:
		return fmt.Errorf("ending the transaction of %s (aborted: none of them is replayed): %w", plural(int64(len(out)), "record"), err)
	case recErr != nil:
		return recErr
	case produceErr != nil:
		return fmt.Errorf("writing to %s: %w (the transaction was aborted: none of its %s is replayed)", out[0].Topic, produceErr, plural(int64(len(out)), "record"))
	case !committed:
		// The group rebalanced mid-transaction: the session aborted it
		// and went back to the committed offsets; the records come
		// again.
		return nil
	}
	r.replayed += len(out)
	r.duplicates += dups
	maps.Copy(r.seen, seen)
	for p, o := range at {
		r.at[p] = max(r.at[p], o)
	}
	return nil
}

// capCommit keeps the transaction's offset commit for the dead-letter
// topic at or below the ends: the session commits past every record
// polled, and a poll may bring records written after the run started,
// which this run does not replay. (kgo.PreTxnCommitFnContext)
func (r *replayer) capCommit(req *kmsg.TxnOffsetCommitRequest) error {
	for i := range req.Topics {
		t := &req.Topics[i]
		if t.Topic != r.dlq {
			continue
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if end, ok := r.ends[p.Partition]; ok && p.Offset > end {
				// No record at end was read: no epoch to check it by.
				p.Offset, p.LeaderEpoch = end, -1
			}
		}
	}
	return nil
}

// replayRecord is rec as replayed to topic: its key, value, timestamp
// and headers, without the fjord.dlq.* ones (the origin is the dead
// letter's, and a replayed-from of an earlier replay is not this one's)
// and with fjord.dlq.replayed-from naming rec.
func replayRecord(rec *kgo.Record, dlq, topic string) *kgo.Record {
	headers := make([]kgo.RecordHeader, 0, len(rec.Headers)+1)
	for _, h := range rec.Headers {
		if !strings.HasPrefix(h.Key, "fjord.dlq.") {
			headers = append(headers, h)
		}
	}
	headers = append(headers, kgo.RecordHeader{Key: poison.HeaderReplayed, Value: fmt.Appendf(nil, "%s/%d/%d", dlq, rec.Partition, rec.Offset)})
	return &kgo.Record{Topic: topic, Key: rec.Key, Value: rec.Value, Timestamp: rec.Timestamp, Headers: headers}
}
