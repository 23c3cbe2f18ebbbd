package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/rebalance"
)

// cluster drain: decommission a broker. Its replicas move to the other
// brokers (each to the one holding fewest of its topic, racks kept as
// spread as they were), through partition reassignments that keep every
// partition at its replication factor throughout; once it holds nothing
// it is unregistered (UnregisterBroker), and a broker-only node leaves
// the metadata log's configuration. Then its process can be stopped.
// Kafka leaves the moves to kafka-reassign-partitions.sh and the end to
// kafka-cluster.sh unregister; Redpanda's `rpk redpanda admin brokers
// decommission` is the model for doing both in one.

// drainRounds bounds how many times drain plans again for replicas
// placed on the broker while it was being drained (a topic created
// meanwhile): the placement uses a broker until it is unregistered.
const drainRounds = 5

func newDrainCommand(o *clientOptions) *cobra.Command {
	var (
		dryRun   bool
		throttle int64
		timeout  time.Duration
		output   string
	)
	cmd := &cobra.Command{
		Use:   "drain BROKER",
		Short: "Decommission a broker: move its replicas to the others, then unregister it",
		Long: `Decommission a broker: move every replica it holds to the other brokers,
then unregister it, so its process can be stopped with nothing lost.

Each replica goes to the broker holding fewest of its topic (racks stay as
spread as they were); every partition keeps its replicas until the new one
has caught up and joined its ISR, so none has fewer than before. Progress
is printed while the moves run; then the moved partitions' preferred
leaders are elected, the broker is unregistered, and a broker-only node
stops receiving the metadata log. Stop its process after that.

Refused, moving nothing: a broker that is not registered, and one
holding a replica that no other broker can take (fewer brokers would be
left than the partition's replication factor). A controller voter's
replicas are moved, but it stays registered while the quorum counts on
it: take it out with remove-voter, stop it, and drain it again to
unregister it.

  --dry-run         print the moves and change nothing
  --throttle BYTES  each receiving broker copies at most BYTES per second
                    for its new replicas
  --timeout D       stop waiting after D (the moves go on; run drain again
                    to finish, it picks up where they are)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			id, err := strconv.ParseInt(args[0], 10, 32)
			if err != nil || id < 0 {
				return fmt.Errorf("broker %q: want a broker id (a whole number, 0 or more)", truncate(args[0], 64))
			}
			if err := checkMoveFlags(cmd, !dryRun, throttle, timeout); err != nil {
				return err
			}
			return withInterruptibleClient(cmd, o, func(ctx context.Context, cl *kgo.Client) error {
				return drainBroker(ctx, cmd, cl, int32(id), dryRun, moveOptions{throttle: throttle, timeout: timeout}, output)
			})
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "print the moves; change nothing")
	f.Int64Var(&throttle, "throttle", 0, "bytes per second each broker receiving a replica may copy (follower.replication.throttled.rate)")
	f.DurationVar(&timeout, "timeout", 0, "stop waiting after this long (the moves go on); 0 waits until they are done")
	addOutputFlag(cmd, &output)
	return cmd
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func drainBroker(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, id int32, dryRun bool, opts moveOptions, output string) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	d, err := describeCluster(rctx, cl)
	if err != nil {
		return fmt.Errorf("describing the cluster: %w", err)
	}
	if !slices.ContainsFunc(d.Brokers, func(b brokerDescription) bool { return b.NodeID == id }) {
		return fmt.Errorf("broker %d is not registered (brokers %s)", id, joinIDs(brokerIDs(d.Brokers)))
	}
	var r moveReport
	start := time.Now()
	for round := 1; ; round++ {
		state, err := readPlacement(ctx, cl)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(state.brokers, func(b rebalance.Broker) bool { return b.ID == id }) {
			// Registered but not live (fenced, or its process gone): its
			// replicas still move, copied from the others in the ISR.
			state.brokers = append(state.brokers, rebalance.Broker{ID: id})
		}
		moves, err := rebalance.Plan(state.brokers, state.partitions, rebalance.Options{Drain: []int32{id}})
		if err != nil {
			return fmt.Errorf("draining broker %d: %w; nothing was moved", id, err)
		}
		next := newMoveReport(state, moves)
		if round == 1 {
			r = next
		} else {
			r.Moves, r.Copies = append(r.Moves, next.Moves...), r.Copies+next.Copies
			r.ThrottledBrokers = nil
		}
		if dryRun {
			return printResult(cmd, output, r)
		}
		if len(moves) == 0 {
			break
		}
		if round > drainRounds {
			return fmt.Errorf("broker %d still gets new replicas after %d rounds of moves (topics created on it meanwhile): try again when fewer are created", id, drainRounds)
		}
		round := moveReport{Moves: next.Moves}
		left := opts
		if opts.timeout > 0 {
			if left.timeout = opts.timeout - time.Since(start); left.timeout <= 0 {
				return fmt.Errorf("--timeout %v passed with broker %d still holding replicas: run drain again to finish", opts.timeout, id)
			}
		}
		if err := makeMoves(ctx, cmd, cl, &round, left); err != nil {
			return err
		}
		r.Throttle, r.ThrottledBrokers = round.Throttle, append(r.ThrottledBrokers, round.ThrottledBrokers...)
		r.Elections = append(r.Elections, round.Elections...)
	}
	r.Executed, r.Done = true, true
	q, err := describeQuorum(ctx, cl)
	if err != nil {
		return fmt.Errorf("describing the controller quorum: %w", err)
	}
	if slices.Contains(q.Voters, id) {
		// The moves are made; a voter stays registered, since the
		// quorum still counts on it.
		if err := printResult(cmd, output, r); err != nil {
			return err
		}
		return fmt.Errorf("broker %d holds no replica now, but it is a controller voter (voters %s), so it stays registered: "+
			"take it out of the quorum (fjord cluster remove-voter --controller-id %d), stop it, then run fjord cluster drain %d again to unregister it",
			id, joinIDs(q.Voters), id, id)
	}
	if err := unregister(ctx, cl, id); err != nil {
		return err
	}
	r.Unregistered = &id
	return printResult(cmd, output, r)
}

// unregister sends UnregisterBroker to the active controller. The
// controller refuses it while the broker holds a replica (a topic
// placed on it after the last round of moves): drain then says so.
func unregister(ctx context.Context, cl *kgo.Client, id int32) error {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req := kmsg.NewPtrUnregisterBrokerRequest()
	req.BrokerID = id
	if err := toController(rctx, cl, req); err != nil {
		return fmt.Errorf("broker %d holds no replica now, but unregistering it failed: %w (run drain again)", id, err)
	}
	return nil
}

func brokerIDs(bs []brokerDescription) []int32 {
	var out []int32
	for _, b := range bs {
		out = append(out, b.NodeID)
	}
	return out
}
