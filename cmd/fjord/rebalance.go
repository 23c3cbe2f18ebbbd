package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/rebalance"
)

// cluster rebalance: compute the partition moves that even out replicas
// and preferred leaderships over the live brokers (internal/rebalance),
// print them, and with --execute apply them: the throttle on the
// receiving brokers, one AlterPartitionReassignments, progress until the
// moves are done, a preferred election of the moved partitions, and the
// throttle removed. Kafka has no such tool of its own (Cruise Control
// and kafka-reassign-partitions.sh --generate fill the gap); the plan it
// prints is kafka-reassign-partitions.sh's JSON, so it can be saved,
// edited and run with `fjord topic reassign` instead.

// moveProgressInterval is how often --execute reports while it waits.
const moveProgressInterval = time.Second

func newRebalanceCommand(o *clientOptions) *cobra.Command {
	var (
		execute  bool
		throttle int64
		timeout  time.Duration
		output   string
	)
	cmd := &cobra.Command{
		Use:   "rebalance",
		Short: "Even out partition replicas and leaders over the brokers: print the moves, --execute to make them",
		Long: `Even out partition replicas and preferred leaders over the live brokers.

The plan gives every broker the same number of replicas, within one, then
the same number of preferred leaderships (first replicas), each as even
within every topic as the cluster allows, without lowering the number of
racks a partition spans. It moves no more data than evening out needs: a
new broker gets its share, the others give theirs. Replicas on brokers
that are not live stay where they are.

Without --execute the plan is printed (as a kafka-reassign-partitions.sh
plan too, for fjord topic reassign). With --execute it is applied:
  1. with --throttle BYTES, each broker receiving a replica copies for it
     at most BYTES per second (follower.replication.throttled.rate);
  2. the moves start (refused while other reassignments are in progress);
  3. progress is printed every second until every move is done (each
     partition keeps its replicas until the new ones are in its ISR, so
     none has fewer than before), or --timeout passes, or Ctrl-C (the
     moves go on; follow them with fjord topic reassign --list);
  4. the moved partitions' preferred leaders are elected;
  5. the throttle is removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			if err := checkMoveFlags(cmd, execute, throttle, timeout); err != nil {
				return err
			}
			return withInterruptibleClient(cmd, o, func(ctx context.Context, cl *kgo.Client) error {
				state, err := readPlacement(ctx, cl)
				if err != nil {
					return err
				}
				moves, err := rebalance.Plan(state.brokers, state.partitions, rebalance.Options{Even: true})
				if err != nil {
					return fmt.Errorf("planning: %w", err)
				}
				r := newMoveReport(state, moves)
				if !execute {
					return printResult(cmd, output, r)
				}
				return executeMoves(ctx, cmd, cl, &r, moveOptions{throttle: throttle, timeout: timeout}, output)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&execute, "execute", false, "make the moves, and wait for them")
	f.Int64Var(&throttle, "throttle", 0, "with --execute: bytes per second each broker receiving a replica may copy (follower.replication.throttled.rate)")
	f.DurationVar(&timeout, "timeout", 0, "with --execute: stop waiting after this long (the moves go on); 0 waits until they are done")
	addOutputFlag(cmd, &output)
	return cmd
}

// withInterruptibleClient runs fn with a client of the cluster and a
// context that SIGINT or SIGTERM ends (for rebalance and drain, the moves
// go on; only the wait stops).
func withInterruptibleClient(cmd *cobra.Command, o *clientOptions, fn func(context.Context, *kgo.Client) error) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	cl, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	return fn(ctx, cl)
}

// checkMoveFlags checks what rebalance and drain share: a throttle and a
// timeout go with making the moves, and are positive.
func checkMoveFlags(cmd *cobra.Command, execute bool, throttle int64, timeout time.Duration) error {
	switch {
	case cmd.Flags().Changed("throttle") && !execute:
		return errors.New("--throttle goes with --execute")
	case cmd.Flags().Changed("timeout") && !execute:
		return errors.New("--timeout goes with --execute")
	case cmd.Flags().Changed("throttle") && throttle < 1:
		return fmt.Errorf("--throttle %d: want the bytes per second each receiving broker may copy, at least 1", throttle)
	case timeout < 0:
		return fmt.Errorf("--timeout %v: want a duration of 0 (no limit) or more", timeout)
	}
	return nil
}

// placement is what the planner needs: the live brokers and every
// partition's replicas.
type placement struct {
	brokers    []rebalance.Broker
	partitions []rebalance.Partition
	leaders    map[partitionKey]int32
}

// readPlacement asks a node for every topic's partitions with a
// Metadata request of its own (kadm's answers may come from the client's
// cache, seconds old).
func readPlacement(ctx context.Context, cl *kgo.Client) (placement, error) {
	req := kmsg.NewPtrMetadataRequest() // null topics: every topic
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return placement{}, fmt.Errorf("reading the cluster's partitions: %w", err)
	}
	s := placement{leaders: map[partitionKey]int32{}}
	for _, b := range resp.Brokers {
		s.brokers = append(s.brokers, rebalance.Broker{ID: b.NodeID, Rack: unptr(b.Rack)})
	}
	slices.SortFunc(s.brokers, func(a, b rebalance.Broker) int { return int(a.ID - b.ID) })
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return placement{}, fmt.Errorf("reading topic %s: %w", unptr(t.Topic), err)
		}
		for _, p := range t.Partitions {
			s.partitions = append(s.partitions, rebalance.Partition{Topic: unptr(t.Topic), Partition: p.Partition, Replicas: p.Replicas})
			s.leaders[partitionKey{unptr(t.Topic), p.Partition}] = p.Leader
		}
	}
	slices.SortFunc(s.partitions, func(a, b rebalance.Partition) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return s, nil
}

// moveReport is cluster rebalance (and drain) -o json.
type moveReport struct {
	Brokers []brokerLoad `json:"brokers"`
	// Moves are the partitions whose replicas change: Replicas now,
	// Target after.
	Moves []partitionMove `json:"moves"`
	// Copies counts the moves that add a replica (copy data); the rest
	// only change the order.
	Copies int `json:"copies"`
	// Executed: the moves were made (--execute); then Done says they
	// all completed, and Elections and ThrottledBrokers what followed.
	Executed         bool              `json:"executed"`
	Done             bool              `json:"done,omitempty"`
	Throttle         int64             `json:"throttle,omitempty"`
	ThrottledBrokers []int32           `json:"throttled_brokers,omitempty"`
	Elections        []electionOutcome `json:"elections,omitempty"`
	// Unregistered is drain's: the broker was unregistered at the end.
	Unregistered *int32 `json:"unregistered,omitempty"`
}

type brokerLoad struct {
	ID            int32  `json:"id"`
	Rack          string `json:"rack,omitempty"`
	Replicas      int    `json:"replicas"`
	ReplicasAfter int    `json:"replicas_after"`
	Leaders       int    `json:"preferred_leaders"`
	LeadersAfter  int    `json:"preferred_leaders_after"`
}

type partitionMove struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Target    []int32 `json:"target"`
}

func newMoveReport(s placement, moves []rebalance.Move) moveReport {
	r := moveReport{Moves: []partitionMove{}}
	load := map[int32]*brokerLoad{}
	for _, b := range s.brokers {
		r.Brokers = append(r.Brokers, brokerLoad{ID: b.ID, Rack: b.Rack})
	}
	for i := range r.Brokers {
		load[r.Brokers[i].ID] = &r.Brokers[i]
	}
	target := map[partitionKey][]int32{}
	for _, m := range moves {
		target[partitionKey{m.Topic, m.Partition}] = m.To
		r.Moves = append(r.Moves, partitionMove{Topic: m.Topic, Partition: m.Partition, Replicas: m.From, Target: m.To})
		if m.Copies() {
			r.Copies++
		}
	}
	for _, p := range s.partitions {
		after, ok := target[partitionKey{p.Topic, p.Partition}]
		if !ok {
			after = p.Replicas
		}
		count := func(replicas []int32, leaders, all func(*brokerLoad)) {
			for i, b := range replicas {
				if l := load[b]; l != nil {
					all(l)
					if i == 0 {
						leaders(l)
					}
				}
			}
		}
		count(p.Replicas, func(l *brokerLoad) { l.Leaders++ }, func(l *brokerLoad) { l.Replicas++ })
		count(after, func(l *brokerLoad) { l.LeadersAfter++ }, func(l *brokerLoad) { l.ReplicasAfter++ })
	}
	return r
}

func (r moveReport) plan() []planPartition {
	var out []planPartition
	for _, m := range r.Moves {
		out = append(out, planPartition{Topic: m.Topic, Partition: m.Partition, Replicas: m.Target})
	}
	return out
}

func (r moveReport) printText(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "BROKER\tRACK\tREPLICAS\tAFTER\tPREFERRED LEADERS\tAFTER")
	for _, b := range r.Brokers {
		rack := b.Rack
		if rack == "" {
			rack = "-"
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%d\n", b.ID, rack, b.Replicas, b.ReplicasAfter, b.Leaders, b.LeadersAfter)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(r.Moves) == 0 {
		_, err := fmt.Fprintln(out, "\nThe cluster is even: nothing to move.")
		return err
	}
	fmt.Fprintf(out, "\n%s: %d copy a replica to another broker, %d only change the preferred leader.\n",
		plural(int64(len(r.Moves)), "partition move"), r.Copies, len(r.Moves)-r.Copies)
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tREPLICAS\tTARGET")
	for _, m := range r.Moves {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", m.Topic, m.Partition, ids(m.Replicas), ids(m.Target))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if r.Executed {
		if r.Throttle > 0 {
			fmt.Fprintf(out, "\nThrottled brokers %s to %d bytes per second while they copied; the throttle is removed.\n", ids(r.ThrottledBrokers), r.Throttle)
		}
		if len(r.Elections) > 0 {
			fmt.Fprintln(out, "\nPreferred leader elections:")
			if err := (electionReport{Partitions: r.Elections}).printText(out); err != nil {
				return err
			}
		}
		if r.Unregistered != nil {
			fmt.Fprintf(out, "\nBroker %d holds no replica and is unregistered: stop its process.\n", *r.Unregistered)
		}
		return nil
	}
	plan, err := json.Marshal(reassignmentPlanJSON{Version: 1, Partitions: r.plan()})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "\nAs a plan for fjord topic reassign --reassignment-json-file:\n%s\nRun again with --execute to make the moves (with --throttle BYTES to limit the copy rate).\n", plan)
	return err
}

// moveOptions are --execute's settings.
type moveOptions struct {
	throttle int64         // bytes per second; 0: none
	timeout  time.Duration // 0: wait until done
}

// executeMoves makes r's moves (makeMoves), then prints r.
func executeMoves(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, r *moveReport, opts moveOptions, output string) error {
	if err := makeMoves(ctx, cmd, cl, r, opts); err != nil {
		return err
	}
	return printResult(cmd, output, *r)
}

// makeMoves makes r's moves and waits for them (see
// newRebalanceCommand's steps), printing progress to stderr, and
// records in r what it did.
func makeMoves(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, r *moveReport, opts moveOptions) error {
	r.Executed = true
	plan := r.plan()
	if len(plan) == 0 {
		r.Done = true
		return nil
	}
	_, inProgress, err := listOngoing(ctx, cl, nil)
	if err != nil {
		return err
	}
	if len(inProgress) > 0 {
		return fmt.Errorf("%s in progress (see fjord topic reassign --list): wait for them, or cancel them, first",
			plural(int64(len(inProgress)), "reassignment"))
	}
	current := map[partitionKey][]int32{}
	for _, m := range r.Moves {
		current[partitionKey{m.Topic, m.Partition}] = m.Replicas
	}
	if r.Throttle, r.ThrottledBrokers, err = throttleReceivers(ctx, cl, opts.throttle, plan, current); err != nil {
		return err
	}
	errs, err := alterReassignments(ctx, cl, plan, false)
	if err != nil {
		return fmt.Errorf("starting the moves: %w", err)
	}
	var outcomes []reassignOutcome
	for i, p := range plan {
		outcomes = append(outcomes, outcome(p, "started", errs[i]))
	}
	if err := failures("moves could not be started", outcomes); err != nil {
		// Some started: they go on; say so with the refusal.
		return fmt.Errorf("%w; the others are in progress (fjord topic reassign --list)", err)
	}
	if err := waitForMoves(ctx, cmd.ErrOrStderr(), cl, plan, opts.timeout); err != nil {
		return err
	}
	r.Done = true
	if r.Elections, err = electPreferredLeaders(ctx, cl, plan); err != nil {
		return err
	}
	if r.Throttle > 0 {
		return setThrottle(ctx, cl, 0, r.ThrottledBrokers)
	}
	return nil
}

// waitForMoves reports, every moveProgressInterval, how many of plan's
// partitions are at their target, until all are; a timeout or a signal
// stops the wait (not the moves).
func waitForMoves(ctx context.Context, progress io.Writer, cl *kgo.Client, plan []planPartition, timeout time.Duration) error {
	start := time.Now()
	deadline := time.Duration(math.MaxInt64)
	if timeout > 0 {
		deadline = timeout
	}
	last := -1
	for {
		done, err := movesDone(ctx, cl, plan)
		if err != nil && ctx.Err() == nil {
			return err
		}
		if done == len(plan) {
			fmt.Fprintf(progress, "%d of %d partitions moved in %s.\n", done, len(plan), time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		if done != last {
			fmt.Fprintf(progress, "%d of %d partitions moved (%s)...\n", done, len(plan), time.Since(start).Round(time.Second))
			last = done
		}
		wait := time.NewTimer(moveProgressInterval)
		select {
		case <-ctx.Done():
			wait.Stop()
			return fmt.Errorf("stopped waiting with %d of %d partitions moved: the moves go on (follow them with fjord topic reassign --list)", done, len(plan))
		case <-wait.C:
		}
		if time.Since(start) > deadline {
			return fmt.Errorf("--timeout %v passed with %d of %d partitions moved: the moves go on (follow them with fjord topic reassign --list)", timeout, done, len(plan))
		}
	}
}

// movesDone counts plan's partitions with no reassignment in progress
// and the target's replicas.
func movesDone(ctx context.Context, cl *kgo.Client, plan []planPartition) (int, error) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	ongoingNow, _, err := listOngoing(rctx, cl, plan)
	if err != nil {
		return 0, err
	}
	current, err := currentReplicas(rctx, cl, plan)
	if err != nil {
		return 0, err
	}
	done := 0
	for _, p := range plan {
		if _, moving := ongoingNow[p.key()]; !moving && slices.Equal(current[p.key()], p.Replicas) {
			done++
		}
	}
	return done, nil
}

// electPreferredLeaders elects the preferred leaders of plan's partitions; an
// election that is not needed is not a failure.
func electPreferredLeaders(ctx context.Context, cl *kgo.Client, plan []planPartition) ([]electionOutcome, error) {
	req := kmsg.NewPtrElectLeadersRequest()
	req.ElectionType = electPreferred
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	order, by := planTopics(plan)
	for _, topic := range order {
		rt := kmsg.NewElectLeadersRequestTopic()
		rt.Topic = topic
		for _, p := range by[topic] {
			rt.Partitions = append(rt.Partitions, p.Partition)
		}
		req.Topics = append(req.Topics, rt)
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return nil, fmt.Errorf("electing the preferred leaders: %w", err)
	}
	var out []electionOutcome
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			o := electionOutcome{Topic: t.Topic, Partition: p.Partition, Result: "elected"}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				o.Result = "not needed"
				if !errors.Is(err, kerr.ElectionNotNeeded) {
					o.Result, o.Message = err.(*kerr.Error).Message, unptr(p.ErrorMessage)
				}
			}
			out = append(out, o)
		}
	}
	return out, nil
}
