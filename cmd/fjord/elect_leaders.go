package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster elect-leaders: Kafka's kafka-leader-election.sh, with its
// option names (--election-type, --topic, --partition,
// --all-topic-partitions), over ElectLeaders.

func newElectLeadersCommand(o *clientOptions) *cobra.Command {
	var (
		electionType string
		topic        string
		partition    int32
		all          bool
		output       string
	)
	cmd := &cobra.Command{
		Use:   "elect-leaders",
		Short: "Elect partition leaders: preferred replicas back into leadership, or, for one partition, an unclean leader",
		Long: `Elect partition leaders (Kafka's kafka-leader-election.sh).

  --election-type preferred  makes each partition's preferred replica (its
                             first) its leader, where that replica is in
                             the ISR and in service. The active controller
                             also does this by itself when leadership is
                             out of balance (fjord serve
                             --auto-leader-rebalance-enable).
  --election-type unclean    gives a leader to a partition that has none:
                             an in-sync replica if one is in service, else
                             the live replica whose log reaches furthest.
                             Records only the in-sync replicas held are
                             lost. One partition at a time, named with
                             --topic and --partition.

Name the partitions with --topic (every partition of it) and optionally
--partition, or with --all-topic-partitions. Each partition's result is
printed: elected, not needed (it already has that leader), or why not.
The command fails when any election that was needed could not be made.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			typ, err := parseElectionType(electionType)
			if err != nil {
				return err
			}
			partitionSet := cmd.Flags().Changed("partition")
			switch {
			case all && topic != "":
				return errors.New("give --topic or --all-topic-partitions, not both")
			case partitionSet && topic == "":
				return errors.New("--partition needs --topic")
			case !all && topic == "":
				return errors.New("name the partitions: --topic TOPIC [--partition N], or --all-topic-partitions")
			case typ == electUnclean && !partitionSet:
				return errors.New("an unclean election is made one partition at a time: give --topic and --partition")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancel()
			req := kmsg.NewPtrElectLeadersRequest()
			req.ElectionType = typ
			req.TimeoutMillis = int32(requestTimeout.Milliseconds())
			if !all {
				rt := kmsg.NewElectLeadersRequestTopic()
				rt.Topic = topic
				if partitionSet {
					rt.Partitions = []int32{partition}
				} else {
					adm, done, err := o.adminClient(ctx)
					if err != nil {
						return err
					}
					n, err := partitionCount(ctx, adm, topic)
					done()
					if err != nil {
						return err
					}
					for p := range n {
						rt.Partitions = append(rt.Partitions, p)
					}
				}
				req.Topics = []kmsg.ElectLeadersRequestTopic{rt}
			}
			cl, err := o.connect(ctx)
			if err != nil {
				return err
			}
			defer cl.Close()
			resp, err := req.RequestWith(ctx, cl)
			if err != nil {
				return fmt.Errorf("electing leaders: %w", err)
			}
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				return fmt.Errorf("electing leaders: %w", err)
			}
			r := electionReport{Type: electionType, Partitions: []electionOutcome{}}
			failed := 0
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					out := electionOutcome{Topic: t.Topic, Partition: p.Partition, Result: "elected"}
					if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
						out.Result = "not needed"
						if !errors.Is(err, kerr.ElectionNotNeeded) {
							out.Result, failed = err.(*kerr.Error).Message, failed+1
						}
						if p.ErrorMessage != nil {
							out.Message = *p.ErrorMessage
						}
					}
					r.Partitions = append(r.Partitions, out)
				}
			}
			if err := printResult(cmd, output, r); err != nil {
				return err
			}
			if failed > 0 {
				return fmt.Errorf("%d of %d elections could not be made", failed, len(r.Partitions))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&electionType, "election-type", "", "preferred or unclean (required)")
	f.StringVar(&topic, "topic", "", "the topic whose partitions to elect")
	f.Var(newIntFlag(&partition, 0, 0, math.MaxInt32, ""), "partition", "the one partition of --topic to elect")
	f.BoolVar(&all, "all-topic-partitions", false, "every partition of every topic (preferred elections only; the answer lists those that needed one)")
	addOutputFlag(cmd, &output)
	return cmd
}

// ElectLeaders' election types.
const (
	electPreferred int8 = 0
	electUnclean   int8 = 1
)

func parseElectionType(s string) (int8, error) {
	switch s {
	case "preferred", "PREFERRED":
		return electPreferred, nil
	case "unclean", "UNCLEAN":
		return electUnclean, nil
	case "":
		return 0, errors.New("--election-type is required: preferred or unclean")
	}
	return 0, fmt.Errorf("--election-type %q: want preferred or unclean", s)
}

// electionReport is cluster elect-leaders -o json.
type electionReport struct {
	Type       string            `json:"election_type"`
	Partitions []electionOutcome `json:"partitions"`
}

type electionOutcome struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Result is "elected", "not needed", or the Kafka error's name.
	Result  string `json:"result"`
	Message string `json:"message,omitempty"`
}

func (r electionReport) printText(out io.Writer) error {
	if len(r.Partitions) == 0 {
		_, err := fmt.Fprintln(out, "No partition needed an election.")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tRESULT\tMESSAGE")
	for _, p := range r.Partitions {
		msg := p.Message
		if p.Result == "elected" || p.Result == "not needed" {
			msg = ""
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", p.Topic, p.Partition, p.Result, msg)
	}
	return w.Flush()
}
