package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/migrate"
)

func newTopicMigrateCommand(o *clientOptions) *cobra.Command {
	var (
		partitions int32
		cutover    bool
	)
	cmd := &cobra.Command{
		Use:   "migrate SRC DST",
		Short: "Move a topic to a new topic with more partitions, keeping each key's order",
		Long: `Move topic SRC to a new topic DST with --partitions partitions, keeping each
key's records in order (adding partitions in place, with topic alter, moves
keys to other partitions).

The command creates DST (closed to producers until the cutover) and copies
SRC into it, each record to the partition its key hashes to, until the copy
has caught up; run it again to catch up again. With --cutover it then:
seals SRC (produces to it fail with an error naming DST), copies what is
left, opens DST to producers, and moves every consumer group's offsets from
SRC to DST once the group is empty. A producer's pause is the drain, about
a second when the copy had caught up. Consumers of SRC read it to its end,
commit and stop; once their group is moved they start again on DST.

Each step is recorded in the topic __fjord_migrations before it starts: if
the command is interrupted or killed, run it again and it finishes the
migration from where it stopped, with every record in DST exactly once.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			cl, err := o.connect(ctx)
			if err != nil {
				return err
			}
			opts := cl.Opts()
			cl.Close()
			progress := newMigrateProgress(cmd.ErrOrStderr())
			p, err := migrate.Run(ctx, migrate.Config{
				Opts:   opts,
				Source: args[0], Dest: args[1],
				Partitions: partitions,
				Cutover:    cutover,
				Progress:   progress.show,
			})
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("interrupted at step %s; run the same command again to go on", p.Migration.Step)
				}
				return err
			}
			out := cmd.OutOrStdout()
			m := p.Migration
			switch m.Step {
			case migrate.StepDone:
				fmt.Fprintf(out, "migrated %s to %s (%s): %s copied, %s moved; produce to and consume from %s\n",
					m.Source, m.Dest, plural(int64(m.DestPartitions), "partition"), plural(p.Copied, "offset"), plural(int64(len(p.Groups)), "group"), m.Dest)
			default:
				fmt.Fprintf(out, "copy of %s to %s caught up: %s copied; run again to catch up again, or with --cutover to switch producers and groups to %s\n",
					m.Source, m.Dest, plural(p.Copied, "offset"), m.Dest)
			}
			return nil
		},
	}
	cmd.Flags().Var(newIntFlag(&partitions, 0, 1, controller.MaxPartitionsPerTopic, ""), "partitions",
		"DST's partition count, at least SRC's (required for a new migration; a resumed one keeps its own)")
	cmd.Flags().BoolVar(&cutover, "cutover", false, "once caught up, seal SRC, drain it, open DST and move the consumer groups")
	return cmd
}

// migrateProgress prints a run's progress, a line per step and about one
// a second while copying or moving groups.
type migrateProgress struct {
	w    io.Writer
	step migrate.Step
}

func newMigrateProgress(w io.Writer) *migrateProgress { return &migrateProgress{w: w} }

func (mp *migrateProgress) show(p migrate.Progress) {
	m := p.Migration
	if m.Step != mp.step {
		mp.step = m.Step
		fmt.Fprintf(mp.w, "%s -> %s: %s\n", m.Source, m.Dest, migrateStepText(m.Step))
	}
	switch m.Step {
	case migrate.StepCopying, migrate.StepCutover:
		fmt.Fprintf(mp.w, "  copied %d, behind %d\n", p.Copied, p.Behind)
	case migrate.StepGroups:
		var waiting []string
		moved := 0
		for _, g := range p.Groups {
			if g.Moved {
				moved++
			} else {
				waiting = append(waiting, fmt.Sprintf("%s (%s, %s)", g.Name, strings.ToLower(g.State), plural(int64(g.Members), "member")))
			}
		}
		fmt.Fprintf(mp.w, "  groups moved %d of %d", moved, len(p.Groups))
		if len(waiting) > 0 {
			fmt.Fprintf(mp.w, "; waiting for %s to stop consuming %s", strings.Join(waiting, ", "), m.Source)
		}
		fmt.Fprintln(mp.w)
	}
}

// migratedError explains a produce refused with INVALID_TOPIC_EXCEPTION
// when the topic's migration has cut over: franz-go keeps the broker's
// message from the caller, so the destination is read from the topic's
// config (metadata.MigratedToConfig).
func migratedError(ctx context.Context, adm *kadm.Client, topic string, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
	defer cancel()
	rcs, derr := adm.DescribeTopicConfigs(ctx, topic)
	if derr != nil {
		return err
	}
	rc, derr := rcs.On(topic, nil)
	if derr != nil || rc.Err != nil {
		return err
	}
	for _, c := range rc.Configs {
		if c.Key == metadata.MigratedToConfig && c.Value != nil && *c.Value != "" {
			return fmt.Errorf("%w: topic %s was migrated to %s (fjord topic migrate): produce to %s", err, topic, *c.Value, *c.Value)
		}
	}
	return err
}

func migrateStepText(s migrate.Step) string {
	switch s {
	case migrate.StepCreating:
		return "creating the destination"
	case migrate.StepCopying:
		return "copying"
	case migrate.StepCutover:
		return "cutover: the source refuses produces; draining it"
	case migrate.StepOpening:
		return "opening the destination to producers"
	case migrate.StepGroups:
		return "moving consumer groups (each once it is empty)"
	case migrate.StepDone:
		return "done"
	}
	return string(s)
}
