package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The transaction commands: what kafka-transactions.sh does (list,
// describe, find-hanging, abort; KIP-664), over the same requests
// (ListTransactions, DescribeTransactions, DescribeProducers,
// WriteTxnMarkers), so they work against any Kafka-compatible cluster,
// not only Fjord.
//
// A hanging transaction is a partition's open transaction that no
// coordinator will ever end: a client wrote a transactional batch without
// AddPartitionsToTxn, or a produce arrived after its transaction's abort
// marker. It holds the partition's last stable offset, so read_committed
// consumers stall behind it, until an abort marker is written to the
// partition (txn abort), which is what the coordinator would have
// written. The coordinator is not told; if the producer does commit
// later, the coordinator's markers find no open transaction there and
// end nothing (docs/kafka-transactions/coordinator.md, 10.3).

func newTxnCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "txn",
		Short: "List and describe transactions; find and abort hanging ones",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	cmd.AddCommand(
		newTxnListCommand(&o),
		newTxnDescribeCommand(&o),
		newTxnFindHangingCommand(&o),
		newTxnAbortCommand(&o),
	)
	return cmd
}

// txnStates are the states ListTransactions and DescribeTransactions
// answer, as Kafka names them. Dead is left out: no coordinator lists an
// id in it.
var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "PrepareEpochFence"}

// parseTxnStates maps --state values (repeatable, comma-separated, any
// case) to Kafka's spelling, which ListTransactions matches exactly.
func parseTxnStates(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		i := slices.IndexFunc(txnStates, func(s string) bool { return strings.EqualFold(s, v) })
		if i < 0 {
			return nil, fmt.Errorf("--state %q: allowed: %s (any case, comma-separated or repeated)", v, strings.Join(txnStates, ", "))
		}
		if !slices.Contains(out, txnStates[i]) {
			out = append(out, txnStates[i])
		}
	}
	return out, nil
}

// parseProducerIDs parses list's --producer-id values (repeatable,
// comma-separated).
func parseProducerIDs(values []string) ([]int64, error) {
	var out []int64
	for _, v := range values {
		id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--producer-id %q: allowed: an integer from 0 to %d (comma-separated or repeated)", v, int64(math.MaxInt64))
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

func newTxnListCommand(o *clientOptions) *cobra.Command {
	var states, producerIDs []string
	var output string
	check := func() ([]string, []int64, error) {
		s, err := parseTxnStates(states)
		if err != nil {
			return nil, nil, err
		}
		ids, err := parseProducerIDs(producerIDs)
		return s, ids, err
	}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the transactional ids the coordinators know, with producer id and state",
		Long: `List every transactional id the cluster's transaction coordinators know (each
node answers for the ids it coordinates), with its coordinator, producer id and
state, as kafka-transactions.sh list does.`,
		Args: cobra.NoArgs,
		// Bad flags fail before the command connects.
		PreRunE: func(*cobra.Command, []string) error {
			_, _, err := check()
			return err
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			wantStates, wantIDs, err := check()
			if err != nil {
				return err
			}
			// A partial list would hide transactions: one node that
			// does not answer fails the command.
			listed, err := adm.ListTransactions(ctx, wantIDs, wantStates)
			if err != nil {
				return fmt.Errorf("listing transactions: %w", err)
			}
			list := txnList{Transactions: []txnListEntry{}}
			for _, l := range listed.Sorted() {
				// A broker that ignores a filter over-answers: filter
				// here too.
				if len(wantStates) > 0 && !slices.Contains(wantStates, l.State) ||
					len(wantIDs) > 0 && !slices.Contains(wantIDs, l.ProducerID) {
					continue
				}
				list.Transactions = append(list.Transactions, txnListEntry{
					TransactionalID: l.TxnID, Coordinator: l.Coordinator, ProducerID: l.ProducerID, State: l.State,
				})
			}
			return printResult(cmd, output, list)
		}),
	}
	f := cmd.Flags()
	f.StringSliceVar(&states, "state", nil, "list only ids in this state (repeatable or comma-separated): "+strings.Join(txnStates, ", "))
	f.StringSliceVar(&producerIDs, "producer-id", nil, "list only ids with this producer id (repeatable or comma-separated)")
	addOutputFlag(cmd, &output)
	return cmd
}

// txnList is txn list -o json.
type txnList struct {
	Transactions []txnListEntry `json:"transactions"`
}

type txnListEntry struct {
	TransactionalID string `json:"transactional_id"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producer_id"`
	State           string `json:"state"`
}

func (l txnList) printText(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TRANSACTIONAL-ID\tCOORDINATOR\tPRODUCER-ID\tSTATE")
	for _, t := range l.Transactions {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\n", t.TransactionalID, t.Coordinator, t.ProducerID, t.State)
	}
	return w.Flush()
}

func newTxnDescribeCommand(o *clientOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe ID [ID...]",
		Short: "Show a transactional id's state, producer id and epoch, timeout, start time and partitions",
		Long: `Show, for each transactional id, what its coordinator has: the state, the
producer id and epoch, the transaction timeout, when the current transaction
started, and its partitions (while the transaction is being committed or
aborted, those whose markers are not written yet). An id no coordinator knows
is an error, after the others are shown.`,
		Args: cobra.MinimumNArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			return checkTransactionalIDs(args)
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error {
			if err := checkTransactionalIDs(args); err != nil {
				return err
			}
			ids := slices.Compact(slices.Sorted(slices.Values(args)))
			described, err := adm.DescribeTransactions(ctx, ids...)
			if err != nil {
				return fmt.Errorf("describing transactional %s: %w", pluralWord(len(ids), "id"), err)
			}
			result := txnDescriptions{Transactions: []txnDescription{}, now: time.Now()}
			var unknown []string
			for _, id := range ids {
				d, ok := described[id]
				switch {
				case !ok || errors.Is(d.Err, kerr.TransactionalIDNotFound):
					unknown = append(unknown, strconv.Quote(id))
					continue
				case d.Err != nil:
					return fmt.Errorf("describing transactional id %q: %w", id, d.Err)
				}
				result.Transactions = append(result.Transactions, describedTxn(d))
			}
			if len(result.Transactions) > 0 {
				if err := printResult(cmd, output, result); err != nil {
					return err
				}
			}
			switch len(unknown) {
			case 0:
				return nil
			case 1:
				return fmt.Errorf("transactional id %s does not exist (fjord txn list shows the ids there are)", unknown[0])
			}
			return fmt.Errorf("transactional ids %s do not exist (fjord txn list shows the ids there are)", strings.Join(unknown, ", "))
		}),
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// checkTransactionalIDs refuses the empty id before any request: Kafka
// answers it with INVALID_REQUEST, which says less.
func checkTransactionalIDs(ids []string) error {
	if slices.Contains(ids, "") {
		return errors.New("a transactional id is empty: give the producer's transactional.id")
	}
	return nil
}

// pluralWord is "id" or "ids".
func pluralWord(n int, noun string) string {
	if n == 1 {
		return noun
	}
	return noun + "s"
}

// txnDescriptions is txn describe's answer; its JSON is -o json.
type txnDescriptions struct {
	Transactions []txnDescription `json:"transactions"`
	now          time.Time        // for the text's "ago"
}

// txnDescription is one transactional id as its coordinator describes it.
type txnDescription struct {
	TransactionalID string `json:"transactional_id"`
	State           string `json:"state"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producer_id"`
	ProducerEpoch   int16  `json:"producer_epoch"`
	TimeoutMs       int32  `json:"timeout_ms"`
	// StartTimeMs is when the current (or last) transaction began; null
	// when none has since InitProducerId.
	StartTimeMs *int64            `json:"start_time_ms"`
	Partitions  []topicPartitions `json:"partitions"`
}

func describedTxn(d kadm.DescribedTransaction) txnDescription {
	out := txnDescription{
		TransactionalID: d.TxnID, State: d.State, Coordinator: d.Coordinator,
		ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, TimeoutMs: d.TimeoutMillis,
		Partitions: []topicPartitions{},
	}
	if d.StartTimestamp >= 0 {
		start := d.StartTimestamp
		out.StartTimeMs = &start
	}
	for _, t := range d.Topics.Sorted() {
		out.Partitions = append(out.Partitions, topicPartitions{Topic: t.Topic, Partitions: nonNil(t.Partitions)})
	}
	return out
}

func (ds txnDescriptions) printText(out io.Writer) error {
	for i, d := range ds.Transactions {
		if i > 0 {
			fmt.Fprintln(out)
		}
		started := "-"
		if d.StartTimeMs != nil {
			started = fmt.Sprintf("%s (%s ago)", formatMillis(*d.StartTimeMs), formatAge(ds.now.Sub(time.UnixMilli(*d.StartTimeMs))))
		}
		fmt.Fprintf(out, "Transactional id: %s\nState: %s\nCoordinator: %d\nProducer id: %d\nProducer epoch: %d\nTimeout: %v\nStarted: %s\nPartitions: %s\n",
			d.TransactionalID, d.State, d.Coordinator, d.ProducerID, d.ProducerEpoch,
			time.Duration(d.TimeoutMs)*time.Millisecond, started, formatTopicPartitions(d.Partitions))
	}
	return nil
}

// formatTopicPartitions is "orders:0,1 payments:3", as group describe
// shows an assignment; "-" for none.
func formatTopicPartitions(ts []topicPartitions) string {
	if len(ts) == 0 {
		return "-"
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		ps := make([]string, len(t.Partitions))
		for j, p := range t.Partitions {
			ps[j] = strconv.Itoa(int(p))
		}
		parts[i] = t.Topic + ":" + strings.Join(ps, ",")
	}
	return strings.Join(parts, " ")
}

// formatMillis is a timestamp in milliseconds as UTC RFC 3339 with
// milliseconds.
func formatMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// formatAge is a duration rounded for people: to 100 ms under a minute,
// to the second above.
func formatAge(d time.Duration) string {
	if d < time.Minute && d > -time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// maxTxnTimeout bounds --max-transaction-timeout: a producer's
// transaction.timeout.ms is an int32 of milliseconds on the wire
// (InitProducerId), so no transaction can have a longer timeout, and a
// larger bound is a mistake (minutes given as milliseconds, say).
const maxTxnTimeout = math.MaxInt32 * time.Millisecond

// txnTimeoutFlag is find-hanging's --max-transaction-timeout: a Go
// duration, or a whole number of minutes as kafka-transactions.sh takes it.
type txnTimeoutFlag struct{ p *time.Duration }

func (f *txnTimeoutFlag) String() string { return f.p.String() }
func (f *txnTimeoutFlag) Type() string   { return "duration" }

func (f *txnTimeoutFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	d, err := time.ParseDuration(s)
	if minutes, perr := strconv.ParseInt(s, 10, 64); perr == nil {
		d, err = time.Duration(minutes)*time.Minute, nil
		if minutes > int64(maxTxnTimeout/time.Minute) || minutes < 0 {
			err = errors.New("out of range")
		}
	}
	if err != nil || d < 0 || d > maxTxnTimeout {
		return fmt.Errorf("allowed: a duration from 0s to %v (2^31-1 ms, the longest transaction timeout a producer can have), e.g. 15m, or whole minutes as Kafka's tool takes them, e.g. 15", maxTxnTimeout)
	}
	*f.p = d
	return nil
}

// findHangingOptions are the flags of txn find-hanging.
type findHangingOptions struct {
	topic     string
	partition int32
	timeout   time.Duration
	output    string
}

// check validates the flags without a node.
func (f *findHangingOptions) check() error {
	if strings.TrimSpace(f.topic) == "" {
		return errors.New("--topic is required: give the topic whose partitions to search (and --partition P for one of them)")
	}
	return nil
}

func newTxnFindHangingCommand(o *clientOptions) *cobra.Command {
	var f findHangingOptions
	cmd := &cobra.Command{
		Use:   "find-hanging --topic T [--partition P] [--max-transaction-timeout 15m]",
		Short: "Find open transactions that no coordinator will end (they hold read_committed consumers back)",
		Long: `Find the hanging transactions of a topic's partitions (or one of them), as
kafka-transactions.sh find-hanging does: DescribeProducers lists each
partition's open transactions; those whose producer last wrote at least
--max-transaction-timeout ago are checked with the coordinators
(ListTransactions by producer id, then DescribeTransactions), and an open
transaction is hanging unless a transactional id of that producer id is
Ongoing, PrepareCommit or PrepareAbort with that partition in its transaction.
Each hanging one is checked still open once more before it is reported, so a
transaction that ended meanwhile is not.

--max-transaction-timeout should be at least the producers'
transaction.timeout.ms: a younger transaction may still be in a coordinator's
hands. Its default, 15m, is the broker's transaction.max.timeout.ms, the
longest a producer may ask for. 0 checks every open transaction, however
recent. A producer's last write is as old as its batch's timestamp says (the
producer's clock, as for Kafka's tool).

The exit status is 0 whether or not any is found; the last line says how many.
End one with fjord txn abort.`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			return f.check()
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return findHanging(ctx, cmd, adm, &f)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "", "the topic whose partitions to search (required)")
	fl.Var(newIntFlag(&f.partition, 0, 0, math.MaxInt32, ""), "partition", "search only this partition of --topic")
	f.timeout = 15 * time.Minute
	fl.Var(&txnTimeoutFlag{&f.timeout}, "max-transaction-timeout", "check only open transactions whose producer last wrote at least this long ago: a duration (15m) or whole minutes (15); 0: all")
	addOutputFlag(cmd, &f.output)
	return cmd
}

// partitionsToSearch is --partition's one partition, or every partition
// of the topic; it fails for a topic or partition that does not exist.
func partitionsToSearch(ctx context.Context, adm *kadm.Client, topic string, partition int32, one bool) ([]int32, error) {
	n, err := partitionCount(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	if one {
		if partition >= n {
			return nil, fmt.Errorf("--partition %d does not exist: topic %s has %s (0 to %d)", partition, topic, plural(int64(n), "partition"), n-1)
		}
		return []int32{partition}, nil
	}
	ps := make([]int32, n)
	for p := range n {
		ps[p] = p
	}
	return ps, nil
}

// describeProducers returns the producers the leaders of topic's
// partitions ps know, sorted by partition and producer id. Any partition
// the answer lacks or refuses fails it: a search that skipped one would
// say "none found" of a partition it never saw.
func describeProducers(ctx context.Context, adm *kadm.Client, topic string, ps []int32) ([]kadm.DescribedProducer, error) {
	set := kadm.TopicsSet{}
	set.Add(topic, ps...)
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("describing the producers of topic %s: %w", topic, err)
	}
	var out []kadm.DescribedProducer
	for _, p := range ps {
		dp, ok := described[topic].Partitions[p]
		switch {
		case !ok:
			return nil, fmt.Errorf("describing the producers of %s-%d: no answer for the partition", topic, p)
		case dp.Err != nil:
			return nil, fmt.Errorf("describing the producers of %s-%d: %w", topic, p, kafkaError(dp.Err, dp.ErrMessage))
		}
		out = append(out, dp.ActiveProducers.Sorted()...)
	}
	return out, nil
}

// activeTxnStates are the states in which a coordinator will still write
// markers to the partitions of the transaction it describes.
// PrepareEpochFence is the step of a fence on the way to PrepareAbort.
var activeTxnStates = []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}

// openTxnCandidates returns the producers with an open transaction whose
// last write is at least timeout before now (every open one for a zero
// timeout): the younger ones may still be in a coordinator's hands.
func openTxnCandidates(producers []kadm.DescribedProducer, now time.Time, timeout time.Duration) (open, candidates []kadm.DescribedProducer) {
	for _, p := range producers {
		if p.CurrentTxnStartOffset < 0 {
			continue
		}
		open = append(open, p)
		if timeout == 0 || now.Sub(time.UnixMilli(p.LastTimestamp)) >= timeout {
			candidates = append(candidates, p)
		}
	}
	return open, candidates
}

// hangingTxn is an open transaction and the transactional id its producer
// id belongs to, if a coordinator knows one.
type hangingTxn struct {
	kadm.DescribedProducer
	transactionalID string // "": none
}

// hangingTransactions decides which of the candidates no coordinator
// will end: the open transaction is hanging unless some transactional id
// described with its producer id is in an active state with its
// partition in the transaction (the coordinator will write that
// partition's marker, which ends whatever that producer has open there).
//
// The producer ids must match, not only the transactional id that
// ListTransactions found by it: an id re-initialised under a new producer
// id (its epoch exhausted) writes its markers with the new one, which
// end nothing of the old. Epochs are not compared: a marker ends a
// producer's open transaction whatever epoch began it, so an older
// epoch's late batch is ended by the current transaction's marker when
// the partition is in it (Kafka's tool does the same).
func hangingTransactions(candidates []kadm.DescribedProducer, described []kadm.DescribedTransaction) []hangingTxn {
	var out []hangingTxn
	for _, c := range candidates {
		h := hangingTxn{DescribedProducer: c}
		known := false
		for _, d := range described {
			if d.Err != nil || d.ProducerID != c.ProducerID {
				continue
			}
			h.transactionalID = d.TxnID
			if slices.Contains(activeTxnStates, d.State) && d.Topics.Lookup(c.Topic, c.Partition) {
				known = true
				break
			}
		}
		if !known {
			out = append(out, h)
		}
	}
	return out
}

func findHanging(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, f *findHangingOptions) error {
	ps, err := partitionsToSearch(ctx, adm, f.topic, f.partition, cmd.Flags().Changed("partition"))
	if err != nil {
		return err
	}
	producers, err := describeProducers(ctx, adm, f.topic, ps)
	if err != nil {
		return err
	}
	open, candidates := openTxnCandidates(producers, time.Now(), f.timeout)

	var hanging []hangingTxn
	if len(candidates) > 0 {
		var pids []int64
		for _, c := range candidates {
			if !slices.Contains(pids, c.ProducerID) {
				pids = append(pids, c.ProducerID)
			}
		}
		// Every coordinator must answer: a transaction missed because
		// its coordinator did not would be reported hanging, and
		// aborting it loses what its producer is about to commit.
		listed, err := adm.ListTransactions(ctx, pids, nil)
		if err != nil {
			return fmt.Errorf("listing the transactions of %s: %w", plural(int64(len(pids)), "producer id"), err)
		}
		var ids []string
		for _, l := range listed.Sorted() {
			if slices.Contains(pids, l.ProducerID) { // an older broker may ignore the filter
				ids = append(ids, l.TxnID)
			}
		}
		var described []kadm.DescribedTransaction
		if len(ids) > 0 {
			d, err := adm.DescribeTransactions(ctx, ids...)
			if err != nil {
				return fmt.Errorf("describing transactional %s %s: %w", pluralWord(len(ids), "id"), strings.Join(ids, ", "), err)
			}
			for _, t := range d.Sorted() {
				// One gone since the listing is no coordinator's:
				// as Kafka's tool, it leaves the transaction hanging.
				if t.Err != nil && !errors.Is(t.Err, kerr.TransactionalIDNotFound) {
					return fmt.Errorf("describing transactional id %q: %w", t.TxnID, t.Err)
				}
				described = append(described, t)
			}
		}
		hanging = hangingTransactions(candidates, described)
	}

	if len(hanging) > 0 {
		// A transaction the coordinator ended between DescribeProducers
		// and DescribeTransactions (its markers written, the partition
		// gone from its set) looks hanging to the check above. Only
		// those still open at the same start offset now are reported;
		// a later transaction starts at a later offset.
		var again []int32
		for _, h := range hanging {
			if !slices.Contains(again, h.Partition) {
				again = append(again, h.Partition)
			}
		}
		stillOpen, err := describeProducers(ctx, adm, f.topic, again)
		if err != nil {
			return err
		}
		hanging = slices.DeleteFunc(hanging, func(h hangingTxn) bool {
			return !slices.ContainsFunc(stillOpen, func(p kadm.DescribedProducer) bool {
				return p.Partition == h.Partition && p.ProducerID == h.ProducerID && p.CurrentTxnStartOffset == h.CurrentTxnStartOffset
			})
		})
	}

	now := time.Now()
	report := hangingReport{
		Topic: f.topic, PartitionsChecked: len(ps), OpenTransactions: len(open), Checked: len(candidates),
		MaxTransactionTimeoutMs: f.timeout.Milliseconds(), Hanging: []hangingEntry{}, timeout: f.timeout,
	}
	if cmd.Flags().Changed("partition") {
		report.Partition = &f.partition
	}
	for _, h := range hanging {
		report.Hanging = append(report.Hanging, hangingEntry{
			Topic: h.Topic, Partition: h.Partition, ProducerID: h.ProducerID, ProducerEpoch: h.ProducerEpoch,
			CoordinatorEpoch: h.CoordinatorEpoch, StartOffset: h.CurrentTxnStartOffset, LastTimestampMs: h.LastTimestamp,
			AgeMs: now.Sub(time.UnixMilli(h.LastTimestamp)).Milliseconds(), TransactionalID: orNull(h.transactionalID),
		})
	}
	return printResult(cmd, f.output, report)
}

// hangingReport is find-hanging's answer; its JSON is -o json.
type hangingReport struct {
	Topic             string `json:"topic"`
	Partition         *int32 `json:"partition"` // null: every partition
	PartitionsChecked int    `json:"partitions_checked"`
	OpenTransactions  int    `json:"open_transactions"`
	// Checked is how many open transactions were old enough to check
	// with the coordinators.
	Checked                 int            `json:"checked"`
	MaxTransactionTimeoutMs int64          `json:"max_transaction_timeout_ms"`
	Hanging                 []hangingEntry `json:"hanging"`
	timeout                 time.Duration
}

type hangingEntry struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	ProducerID    int64  `json:"producer_id"`
	ProducerEpoch int16  `json:"producer_epoch"`
	// CoordinatorEpoch is of the producer's last marker on the
	// partition; -1: none.
	CoordinatorEpoch int32 `json:"coordinator_epoch"`
	StartOffset      int64 `json:"start_offset"`
	LastTimestampMs  int64 `json:"last_timestamp_ms"`
	AgeMs            int64 `json:"age_ms"`
	// TransactionalID is the id a coordinator has the producer id under
	// (with another transaction, or none open); null: no coordinator
	// knows the producer id.
	TransactionalID *string `json:"transactional_id"`
}

func (r hangingReport) printText(out io.Writer) error {
	if len(r.Hanging) > 0 {
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "TOPIC\tPARTITION\tPRODUCER-ID\tEPOCH\tCOORDINATOR-EPOCH\tSTART-OFFSET\tLAST-TIMESTAMP\tAGE\tTRANSACTIONAL-ID")
		for _, h := range r.Hanging {
			fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n", h.Topic, h.Partition, h.ProducerID, h.ProducerEpoch,
				h.CoordinatorEpoch, h.StartOffset, formatMillis(h.LastTimestampMs), formatAge(time.Duration(h.AgeMs)*time.Millisecond), dashIfNull(h.TransactionalID))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	where := fmt.Sprintf("%s of topic %s", plural(int64(r.PartitionsChecked), "partition"), r.Topic)
	if r.Partition != nil {
		where = fmt.Sprintf("partition %d of topic %s", *r.Partition, r.Topic)
	}
	fmt.Fprintf(out, "found %s in %s (%s, %d last written at least %v ago)\n",
		plural(int64(len(r.Hanging)), "hanging transaction"), where, plural(int64(r.OpenTransactions), "open transaction"), r.Checked, r.timeout)
	if len(r.Hanging) > 0 {
		h := r.Hanging[0]
		fmt.Fprintf(out, "end each with fjord txn abort, e.g. fjord txn abort --topic %s --partition %d --start-offset %d\n", h.Topic, h.Partition, h.StartOffset)
	}
	return nil
}

// abortOptions are the flags of txn abort.
type abortOptions struct {
	topic            string
	partition        int32
	startOffset      int64
	producerID       int64
	producerEpoch    int16
	coordinatorEpoch int32
}

const abortHelp = "give --start-offset O (the transaction's first offset, as find-hanging prints it), or --producer-id, --producer-epoch and --coordinator-epoch"

// check validates the flags without a node: the partition, and exactly
// one way to name the transaction.
func (a *abortOptions) check(cmd *cobra.Command) error {
	changed := cmd.Flags().Changed
	switch {
	case strings.TrimSpace(a.topic) == "":
		return errors.New("--topic is required: give the topic of the partition holding the transaction")
	case !changed("partition"):
		return errors.New("--partition is required: give the partition holding the transaction")
	case changed("start-offset") && changed("producer-id"):
		return errors.New("--start-offset and --producer-id exclude each other: " + abortHelp)
	case changed("start-offset"):
		if given := givenFlags(cmd, "producer-epoch", "coordinator-epoch"); len(given) > 0 {
			return fmt.Errorf("%s with --producer-id, not --start-offset (which takes them from the partition): %s", onlyWith(given), abortHelp)
		}
	case changed("producer-id"):
		for _, name := range []string{"producer-epoch", "coordinator-epoch"} {
			if !changed(name) {
				return fmt.Errorf("--producer-id needs --%s too (find-hanging prints it): %s", name, abortHelp)
			}
		}
	default:
		if given := givenFlags(cmd, "producer-epoch", "coordinator-epoch"); len(given) > 0 {
			return fmt.Errorf("%s with --producer-id: %s", onlyWith(given), abortHelp)
		}
		return errors.New("say which transaction to abort: " + abortHelp)
	}
	return nil
}

// onlyWith is "--a goes" or "--a and --b go".
func onlyWith(flags []string) string {
	if len(flags) == 1 {
		return flags[0] + " goes only"
	}
	return strings.Join(flags, " and ") + " go only"
}

func newTxnAbortCommand(o *clientOptions) *cobra.Command {
	var a abortOptions
	cmd := &cobra.Command{
		Use:   "abort --topic T --partition P (--start-offset O | --producer-id N --producer-epoch E --coordinator-epoch C)",
		Short: "Abort a hanging transaction: write an abort marker to its partition",
		Long: `Abort a hanging transaction on one partition, as kafka-transactions.sh abort
does: write an abort marker (WriteTxnMarkers) to the partition's leader, which
ends the producer's open transaction there, discards its records for
read_committed consumers, and lets the partition's last stable offset move on.

--start-offset O names the open transaction that starts at offset O (as
fjord txn find-hanging prints it); the producer id, epoch and coordinator epoch
are taken from the partition (DescribeProducers). Or give --producer-id,
--producer-epoch and --coordinator-epoch yourself; a negative coordinator epoch
(DescribeProducers' -1: no marker yet) is written as 0, as Kafka's tool does.
A producer with no open transaction on the partition is refused: a marker
would end nothing and could fence that producer's next writes.

The coordinator is not told: abort only transactions find-hanging reports,
never one a producer may still commit.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return a.check(cmd)
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			if err := a.check(cmd); err != nil {
				return err
			}
			return abortTxn(ctx, cmd, adm, &a)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&a.topic, "topic", "", "the topic of the partition holding the transaction (required)")
	f.Var(newIntFlag(&a.partition, 0, 0, math.MaxInt32, ""), "partition", "the partition holding the transaction (required)")
	f.Var(newIntFlag(&a.startOffset, 0, 0, math.MaxInt64, ""), "start-offset", "the offset the open transaction starts at, as find-hanging prints it")
	f.Var(newIntFlag(&a.producerID, 0, 0, math.MaxInt64, ""), "producer-id", "the producer id of the transaction (instead of --start-offset)")
	f.Var(newIntFlag(&a.producerEpoch, 0, 0, math.MaxInt16, ""), "producer-epoch", "the producer epoch of the transaction (with --producer-id)")
	f.Var(newIntFlag(&a.coordinatorEpoch, 0, math.MinInt32, math.MaxInt32, "(negative: written as 0)"), "coordinator-epoch",
		"the coordinator epoch of the producer's last marker (with --producer-id; -1 for none is written as 0)")
	return cmd
}

func abortTxn(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, a *abortOptions) error {
	if _, err := partitionsToSearch(ctx, adm, a.topic, a.partition, true); err != nil {
		return err
	}
	tp := fmt.Sprintf("%s-%d", a.topic, a.partition)
	producers, describeErr := describeProducers(ctx, adm, a.topic, []int32{a.partition})
	var open []int64 // start offsets, for the error below
	for _, p := range producers {
		if p.CurrentTxnStartOffset >= 0 {
			open = append(open, p.CurrentTxnStartOffset)
		}
	}
	slices.Sort(open)
	openHint := "it has no open transaction"
	if len(open) > 0 {
		s := make([]string, len(open))
		for i, o := range open {
			s[i] = strconv.FormatInt(o, 10)
		}
		openHint = fmt.Sprintf("its open transactions start at %s", strings.Join(s, ", "))
	}

	var target kadm.DescribedProducer
	found := false
	if cmd.Flags().Changed("start-offset") {
		if describeErr != nil {
			return describeErr
		}
		i := slices.IndexFunc(producers, func(p kadm.DescribedProducer) bool { return p.CurrentTxnStartOffset == a.startOffset })
		if i < 0 {
			return fmt.Errorf("no open transaction starts at offset %d on %s (%s; fjord txn find-hanging --topic %s lists the hanging ones)",
				a.startOffset, tp, openHint, a.topic)
		}
		target, found = producers[i], true
	} else {
		target = kadm.DescribedProducer{ProducerID: a.producerID, ProducerEpoch: a.producerEpoch, CoordinatorEpoch: a.coordinatorEpoch, CurrentTxnStartOffset: -1}
		switch {
		case describeErr != nil:
			// The way for brokers without DescribeProducers (before
			// Kafka 2.8): write as given.
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: %v; writing the marker as given\n", describeErr)
		default:
			i := slices.IndexFunc(producers, func(p kadm.DescribedProducer) bool {
				return p.ProducerID == a.producerID && p.CurrentTxnStartOffset >= 0
			})
			if i < 0 {
				return fmt.Errorf("producer %d has no open transaction on %s (%s): nothing to abort", a.producerID, tp, openHint)
			}
			target.CurrentTxnStartOffset, found = producers[i].CurrentTxnStartOffset, true
		}
	}
	// As Kafka's tool: a producer whose first transaction hangs has no
	// marker yet, reported as coordinator epoch -1; 0 is at most every
	// coordinator epoch, so the partition accepts it.
	coordinatorEpoch := max(target.CoordinatorEpoch, 0)

	written, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
		ProducerID: target.ProducerID, ProducerEpoch: target.ProducerEpoch, CoordinatorEpoch: coordinatorEpoch,
		Commit: false, Topics: kadm.TopicsSet{a.topic: {a.partition: {}}},
	})
	what := fmt.Sprintf("producer %d (epoch %d, coordinator epoch %d)", target.ProducerID, target.ProducerEpoch, coordinatorEpoch)
	if err != nil {
		return fmt.Errorf("writing an abort marker for %s to %s: %w", what, tp, err)
	}
	res, ok := written[target.ProducerID].Topics[a.topic].Partitions[a.partition]
	if !ok {
		return fmt.Errorf("writing an abort marker for %s to %s: the leader's answer does not name the partition", what, tp)
	}
	if res.Err != nil {
		return fmt.Errorf("the leader of %s refused the abort marker for %s: %w", tp, what, kafkaError(res.Err, refusalHint(res.Err, target.ProducerID)))
	}
	ended := "the transaction"
	if found {
		ended = fmt.Sprintf("the transaction that started at offset %d", target.CurrentTxnStartOffset)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "aborted %s on %s: wrote an abort marker for %s to the leader, node %d\n", ended, tp, what, res.NodeID)
	return nil
}

// refusalHint says what a marker's refusal means for the admin abort
// (WriteTxnMarkers answers carry no message of the broker's).
func refusalHint(err error, producerID int64) string {
	switch {
	case errors.Is(err, kerr.InvalidProducerEpoch):
		return fmt.Sprintf("the partition has a newer epoch of producer %d; --start-offset takes the partition's own", producerID)
	case errors.Is(err, kerr.TransactionCoordinatorFenced):
		return fmt.Sprintf("the partition has a marker of producer %d with a newer coordinator epoch; --start-offset takes the partition's own", producerID)
	case errors.Is(err, kerr.NotLeaderForPartition):
		return "its leadership moved meanwhile; run the command again"
	}
	return ""
}
