package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/poison"
)

// Poison records (issue 18, DESIGN.md section 24): a consumer group's
// policy per topic for a record that fails every time, the partitions
// the group paused at one, and ending such a pause. The policies and
// pauses live in the policies topic (internal/poison), which the HTTP
// API's consumer instances act on; these commands read and write it as
// the HTTP API does (internal/httpapi/poison.go), with the same checks
// and words, so an operator can use either.
//
// Commands that only read (describe, and clear or resume with nothing
// to do) read the topic with poison.Load, which never creates it: a
// look at a cluster leaves nothing behind, and the topic is created,
// with the cluster's replication factor at that time, by the first
// write (package poison, Limits).

func newGroupPoisonCommand(o *clientOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "poison",
		Short: "Set, show and clear a group's poison-record policies (what to do with a record that fails every time)",
		Long: `A poison-record policy says, for one consumer group and one topic, what to do
with a record that failed --max-attempts times: pause the partition for the
group at that record (nothing more is delivered from it until "fjord group
resume"), or write it to a dead-letter topic with its origin in headers and
move past it.

Attempts are counted where delivery happens: by the HTTP API's consumer
instances in ack_mode=records, each nack of a record counting one. The Kafka
protocol cannot tell a failed record from a slow consumer, so Kafka clients
are not governed by a policy.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(
		newGroupPoisonSetCommand(o),
		newGroupPoisonDescribeCommand(o),
		newGroupPoisonClearCommand(o),
	)
	return cmd
}

// poisonSetOptions are the flags of group poison set.
type poisonSetOptions struct {
	topic       string
	action      string // --policy
	maxAttempts int32
	dlqTopic    string
}

// policy validates the flags without a node and returns the policy they
// set. The policy's own checks (poison.Policy.Validate) are the HTTP
// API's, word for word.
func (s *poisonSetOptions) policy(cmd *cobra.Command, group string) (poison.Policy, error) {
	if err := checkGroupID(group); err != nil {
		return poison.Policy{}, err
	}
	changed := cmd.Flags().Changed
	switch {
	case !changed("topic"):
		return poison.Policy{}, errors.New("--topic is required: give the topic the policy is for")
	case !changed("policy"):
		return poison.Policy{}, fmt.Errorf("--policy is required: %s (stop the partition at the record) or %s (write it to the dead-letter topic and move past it)",
			poison.ActionPause, poison.ActionDLQ)
	case !changed("max-attempts"):
		return poison.Policy{}, fmt.Errorf("--max-attempts is required: after how many failed attempts at one record the policy acts (1 to %d)", poison.MaxAttemptsLimit)
	case changed("dlq-topic") && s.dlqTopic == "":
		// "" is how a Policy says "the default": given on purpose, it
		// is more likely an unset variable than a wish for the default.
		return poison.Policy{}, fmt.Errorf("--dlq-topic is empty: leave it out for the default %s", poison.DefaultDLQTopic(s.topic))
	}
	p := poison.Policy{Group: group, Topic: s.topic, Action: poison.Action(s.action), MaxAttempts: s.maxAttempts, DLQTopic: s.dlqTopic}
	return p, p.Validate()
}

func newGroupPoisonSetCommand(o *clientOptions) *cobra.Command {
	var s poisonSetOptions
	cmd := &cobra.Command{
		Use:   "set GROUP --topic TOPIC --policy pause|dlq --max-attempts N [--dlq-topic TOPIC]",
		Short: "Set a group's poison-record policy for a topic",
		Long: `Set what consumer group GROUP does with a record of --topic that failed
--max-attempts times (1 to 1000):

  --policy pause   stop delivering the partition to the group at the record,
                   until "fjord group resume" (with --skip, the record goes to
                   the dead-letter topic first)
  --policy dlq     write the record to the dead-letter topic, with its topic,
                   partition, offset, timestamp, the group and the failure
                   reason in fjord.dlq.* headers, and only then move the
                   group's committed offset past it

The dead-letter topic is --dlq-topic, or TOPIC.dlq; with dlq it is created now
if it does not exist. A policy replaces the group's earlier one for the topic.
A policy that is not valid (an unknown --policy, --max-attempts outside 1 to
1000, a dead-letter topic that is the topic itself) is refused, and nothing
is written.`,
		Args: cobra.ExactArgs(1),
		// Bad flags fail before the command connects.
		PreRunE: func(cmd *cobra.Command, args []string) error {
			_, err := s.policy(cmd, args[0])
			return err
		},
		RunE: clientRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, adm *kadm.Client, args []string) error {
			p, err := s.policy(cmd, args[0])
			if err != nil {
				return err
			}
			return setPolicy(ctx, cmd, cl, adm, p)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&s.topic, "topic", "", "the topic the policy is for")
	f.StringVar(&s.action, "policy", "", "what to do with a record that failed --max-attempts times: pause or dlq")
	// The whole int32 range is parsed: the policy's own check says what
	// is allowed, in the HTTP API's words.
	f.Var(newIntFlag(&s.maxAttempts, 0, math.MinInt32, math.MaxInt32, ""), "max-attempts", "failed attempts at one record before the policy acts (1 to 1000)")
	f.StringVar(&s.dlqTopic, "dlq-topic", "", "the dead-letter topic (default: TOPIC.dlq)")
	return cmd
}

// setPolicy writes p once its topic is known to exist and, for dlq, its
// dead-letter topic does: a policy for a topic that is not there would
// never act, and a dead-letter write must not wait for a topic to be
// made (the HTTP API's order).
func setPolicy(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, adm *kadm.Client, p poison.Policy) error {
	if _, err := partitionCount(ctx, adm, p.Topic); err != nil {
		return err
	}
	if p.Action == poison.ActionDLQ {
		if err := poison.EnsureDLQTopic(ctx, adm, p.DeadLetterTopic()); err != nil {
			return err
		}
	}
	store, err := openPolicies(ctx, cl)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.SetPolicy(ctx, p); err != nil {
		return fmt.Errorf("setting the poison policy of group %q on topic %q: %w", p.Group, p.Topic, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "set the poison policy of group %s on topic %s: %s\n", p.Group, p.Topic, policyWords(p))
	return nil
}

// policyWords says what p does, for set's and clear's output.
func policyWords(p poison.Policy) string {
	attempts := plural(int64(p.MaxAttempts), "failed attempt")
	if p.Action == poison.ActionPause {
		return fmt.Sprintf(`pause the partition after %s at one record ("fjord group resume --skip" writes the record to %s)`, attempts, p.DeadLetterTopic())
	}
	return fmt.Sprintf("after %s at one record, write it to the dead-letter topic %s and move past it", attempts, p.DeadLetterTopic())
}

// openPolicies opens the policies topic for a write, with the CLI
// client's options.
func openPolicies(ctx context.Context, cl *kgo.Client) (*poison.Store, error) {
	seeds, _ := cl.OptValue(kgo.SeedBrokers).([]string)
	store, err := poison.Open(ctx, seeds, cl.Opts()...)
	if err != nil {
		return nil, fmt.Errorf("opening the consumer policies (%s): %w", poison.Topic, err)
	}
	return store, nil
}

// loadPolicies reads the policies topic without creating it.
func loadPolicies(ctx context.Context, cl *kgo.Client) (*poison.View, error) {
	v, err := poison.Load(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("reading the consumer policies (%s): %w", poison.Topic, err)
	}
	return v, nil
}

func newGroupPoisonDescribeCommand(o *clientOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's poison-record policies and the partitions it paused at a poison record",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			return checkGroupID(args[0])
		},
		RunE: clientRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, _ *kadm.Client, args []string) error {
			group := args[0]
			v, err := loadPolicies(ctx, cl)
			if err != nil {
				return err
			}
			d := poisonDescription{Group: group, Policies: []policyRow{}, Paused: pausedPartitions(v.Pauses(group, ""))}
			for _, p := range v.Policies(group) {
				d.Policies = append(d.Policies, policyRow{Topic: p.Topic, Policy: string(p.Action), MaxAttempts: p.MaxAttempts, DLQTopic: p.DeadLetterTopic()})
			}
			return printResult(cmd, output, d)
		}),
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// poisonDescription is group poison describe; its JSON is -o json.
type poisonDescription struct {
	Group    string            `json:"group"`
	Policies []policyRow       `json:"policies"`
	Paused   []pausedPartition `json:"paused"`
}

type policyRow struct {
	Topic       string `json:"topic"`
	Policy      string `json:"policy"` // "pause" or "dlq"
	MaxAttempts int32  `json:"max_attempts"`
	// DLQTopic is the dead-letter topic in effect under either policy:
	// under pause it is where `group resume --skip` writes the record.
	DLQTopic string `json:"dlq_topic"`
}

func (d poisonDescription) printText(out io.Writer) error {
	fmt.Fprintf(out, "Group: %s\n\n", d.Group)
	if len(d.Policies) == 0 {
		fmt.Fprintln(out, "Policies: none")
	} else {
		fmt.Fprintln(out, "Policies:")
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "TOPIC\tPOLICY\tMAX-ATTEMPTS\tDLQ-TOPIC")
		for _, p := range d.Policies {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\n", p.Topic, p.Policy, p.MaxAttempts, p.DLQTopic)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if len(d.Paused) == 0 {
		fmt.Fprintln(out, "\nPaused: none")
		return nil
	}
	return printPaused(out, d.Group, d.Paused)
}

// pausedPartition is a partition a group paused at a poison record, as
// group describe and group poison describe show it; the words are the
// HTTP API's (GET /v1/groups/{group}/poison).
type pausedPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"` // the poison record's
	Reason    string `json:"reason"`
	Attempts  int32  `json:"attempts"`
	AtMs      int64  `json:"at_ms"` // when it paused
	// Skip: resumed with --skip, the record is in the dead-letter topic,
	// and the partition's owner has yet to commit past it.
	Skip bool `json:"skip"`
}

func pausedPartitions(pauses []poison.Pause) []pausedPartition {
	out := []pausedPartition{}
	for _, pz := range pauses {
		out = append(out, pausedPartition{Topic: pz.Topic, Partition: pz.Partition, Offset: pz.Offset,
			Reason: pz.Reason, Attempts: pz.Attempts, AtMs: pz.At.UnixMilli(), Skip: pz.Skip})
	}
	return out
}

// groupPauses are group's paused partitions, read without creating the
// policies topic (group describe works against any Kafka cluster, where
// there is none).
func groupPauses(ctx context.Context, cl *kgo.Client, group string) ([]pausedPartition, error) {
	v, err := loadPolicies(ctx, cl)
	if err != nil {
		return nil, err
	}
	return pausedPartitions(v.Pauses(group, "")), nil
}

// printPaused writes the "Paused:" section: a table, the skips waiting
// for their owner, and how to resume.
func printPaused(out io.Writer, group string, paused []pausedPartition) error {
	fmt.Fprintln(out, "\nPaused:")
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tOFFSET\tATTEMPTS\tPAUSED-AT\tREASON")
	for _, p := range paused {
		// A reason is a consumer's error message: a tab or newline in
		// it must not break the table.
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\n", p.Topic, p.Partition, p.Offset, p.Attempts, formatMillis(p.AtMs), appendPrintable(nil, []byte(p.Reason)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, p := range paused {
		if p.Skip {
			fmt.Fprintf(out, "%s-%d was resumed with --skip: the record at offset %d is in the dead-letter topic, and the partition's owner commits past it at its next consume.\n",
				p.Topic, p.Partition, p.Offset)
		}
	}
	fmt.Fprintf(out, "Resume with \"fjord group resume %s --topic TOPIC --partition P\" (delivery starts again at the record), or with --skip (the record goes to the dead-letter topic and delivery starts after it).\n", group)
	return nil
}

func newGroupPoisonClearCommand(o *clientOptions) *cobra.Command {
	var topic string
	cmd := &cobra.Command{
		Use:   "clear GROUP --topic TOPIC",
		Short: "Remove a group's poison-record policy for a topic",
		Long: `Remove the poison-record policy of consumer group GROUP for --topic: from then
on a failed record is only delivered again, however often it fails. Partitions
already paused stay paused until "fjord group resume".`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			return checkTopicFlag(cmd, args[0], "the topic whose policy to remove")
		},
		RunE: clientRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, _ *kadm.Client, args []string) error {
			return clearPolicy(ctx, cmd, cl, args[0], topic)
		}),
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic whose policy to remove")
	return cmd
}

// checkTopicFlag refuses an empty group and a missing --topic, which
// says what the topic is for.
func checkTopicFlag(cmd *cobra.Command, group, what string) error {
	if err := checkGroupID(group); err != nil {
		return err
	}
	if f := cmd.Flags().Lookup("topic"); !f.Changed || f.Value.String() == "" {
		return fmt.Errorf("--topic is required: give %s", what)
	}
	return nil
}

func clearPolicy(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, group, topic string) error {
	v, err := loadPolicies(ctx, cl)
	if err != nil {
		return err
	}
	var had *poison.Policy
	for _, p := range v.Policies(group) {
		if p.Topic == topic {
			had = &p
		}
	}
	out := cmd.OutOrStdout()
	// With no policy to remove nothing is written (and the topic is not
	// created) unless some record could not be read: it may be a
	// policy of a newer version, which only the tombstone removes.
	if had == nil && v.Undecodable() == 0 {
		fmt.Fprintf(out, "group %s has no poison policy on topic %s: nothing to clear\n", group, topic)
		return nil
	}
	store, err := openPolicies(ctx, cl)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.ClearPolicy(ctx, group, topic); err != nil {
		return fmt.Errorf("clearing the poison policy of group %q on topic %q: %w", group, topic, err)
	}
	if had == nil {
		fmt.Fprintf(out, "cleared the poison policy of group %s on topic %s\n", group, topic)
	} else {
		fmt.Fprintf(out, "cleared the poison policy of group %s on topic %s (it was: %s)\n", group, topic, policyWords(*had))
	}
	if n := len(v.Pauses(group, topic)); n > 0 {
		fmt.Fprintf(out, "%s of topic %s stay paused until \"fjord group resume\"\n", plural(int64(n), "partition"), topic)
	}
	return nil
}

// resumeOptions are the flags of group resume.
type resumeOptions struct {
	topic     string
	partition int32
	skip      bool
}

func newGroupResumeCommand(o *clientOptions) *cobra.Command {
	var r resumeOptions
	cmd := &cobra.Command{
		Use:   "resume GROUP --topic TOPIC --partition P [--skip]",
		Short: "End a group's pause of a partition at a poison record, optionally skipping the record into the dead-letter topic",
		Long: `End the pause of partition --partition of --topic that consumer group GROUP
made at a poison record (its poison policy "pause"; "fjord group describe"
shows the paused partitions).

Without --skip, delivery starts again at the paused record.

With --skip, the record is first written to the dead-letter topic (the
policy's --dlq-topic, or TOPIC.dlq; created if missing), with its origin in
fjord.dlq.* headers, and then the group moves past it: a group without
members has its committed offset moved now; in a group with members only
the partition's owner can commit, so it commits past the record at its next
consume. A failure at any step leaves the partition paused, or the record
written to the dead-letter topic once more at most; never skipped without
its copy.`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if err := checkTopicFlag(cmd, args[0], "the topic of the paused partition"); err != nil {
				return err
			}
			if !cmd.Flags().Changed("partition") {
				return errors.New("--partition is required: give the paused partition (\"fjord group describe\" shows it)")
			}
			return nil
		},
		RunE: clientRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, _ *kadm.Client, args []string) error {
			return resumePartition(ctx, cmd, cl, args[0], r)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&r.topic, "topic", "", "the topic of the paused partition")
	f.Var(newIntFlag(&r.partition, 0, 0, math.MaxInt32, ""), "partition", "the paused partition")
	addBoolFlag(f, &r.skip, "skip", false, "write the paused record to the dead-letter topic and move the group past it, instead of delivering it again")
	return cmd
}

func notPaused(group, topic string, partition int32) error {
	return fmt.Errorf("group %q has no pause on partition %d of topic %q (\"fjord group poison describe %s\" lists its paused partitions)", group, partition, topic, group)
}

func resumePartition(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, group string, r resumeOptions) error {
	// Looked up first without creating the policies topic, so that a
	// resume of a partition that is not paused (a typo) changes nothing.
	v, err := loadPolicies(ctx, cl)
	if err != nil {
		return err
	}
	paused := false
	for _, pz := range v.Pauses(group, r.topic) {
		paused = paused || pz.Partition == r.partition
	}
	if !paused {
		return notPaused(group, r.topic, r.partition)
	}
	store, err := openPolicies(ctx, cl)
	if err != nil {
		return err
	}
	defer store.Close()
	// The dead-letter write: idempotent (franz-go's default) and
	// acks=all, as the HTTP API's.
	producer, err := kgo.NewClient(append(cl.Opts(), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		return err
	}
	defer producer.Close()
	res, err := poison.Resume(ctx, store, cl, producer, group, r.topic, r.partition, r.skip)
	switch {
	case errors.Is(err, poison.ErrNotPaused):
		return notPaused(group, r.topic, r.partition) // resumed by someone else meanwhile
	case err != nil:
		return fmt.Errorf("resuming %s-%d for group %q: %w (what is not done stays to do: run the command again; a --skip writes the record to the dead-letter topic once more at most)",
			r.topic, r.partition, group, err)
	}
	out, at := cmd.OutOrStdout(), res.Pause.Offset
	if !r.skip {
		fmt.Fprintf(out, "resumed %s-%d for group %s at offset %d: the paused record is delivered again\n", r.topic, r.partition, group, at)
		return nil
	}
	dl := res.DeadLetter
	skipped := fmt.Sprintf("skipped the record at offset %d of %s-%d into %s at partition %d, offset %d", at, r.topic, r.partition, dl.Topic, dl.Partition, dl.Offset)
	if res.Committed {
		fmt.Fprintf(out, "%s; committed group %s past it (offset %d) and resumed the partition\n", skipped, group, at+1)
	} else {
		fmt.Fprintf(out, "%s; group %s has members, so the partition's owner commits past it (offset %d) at its next consume and resumes the partition there\n", skipped, group, at+1)
	}
	return nil
}

// appendPrintable appends s as text on one line: format.go's
// appendEscaped (a backslash and every byte that is not printable UTF-8
// as \xHH) without escaping ',' and '=', which only a header list needs.
// Both are ASCII, so cutting s at them never splits a character.
func appendPrintable(b, s []byte) []byte {
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != ',' && s[i] != '=' {
			i++
		}
		b = appendEscaped(b, s[:i])
		if i == len(s) {
			break
		}
		b, s = append(b, s[i]), s[i+1:]
	}
	return b
}
