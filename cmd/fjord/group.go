package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/groupview"
)

// The consumer-group commands: what kafka-consumer-groups.sh does, over
// the same requests (ListGroups, DescribeGroups, OffsetFetch,
// ListOffsets, OffsetCommit, DeleteGroups), so they work against any
// Kafka-compatible cluster, not only Fjord.

func newGroupCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "group",
		Short: "List, describe, reset, delete and resume consumer groups; set their poison-record policies",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	cmd.AddCommand(
		newGroupListCommand(&o),
		newGroupDescribeCommand(&o),
		newGroupResetOffsetsCommand(&o),
		newGroupDeleteCommand(&o),
		newGroupPoisonCommand(&o),
		newGroupResumeCommand(&o),
	)
	return cmd
}

// groupStates are the states of a classic group, as Kafka names them.
var groupStates = []string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}

// parseGroupStates maps --state values (repeatable, comma-separated,
// any case, as Kafka's tool accepts them) to Kafka's spelling.
func parseGroupStates(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		v = strings.TrimSpace(v)
		i := slices.IndexFunc(groupStates, func(s string) bool { return strings.EqualFold(s, v) })
		if i < 0 {
			return nil, fmt.Errorf("--state %q: allowed: %s (any case, comma-separated or repeated)", v, strings.Join(groupStates, ", "))
		}
		if !slices.Contains(out, groupStates[i]) {
			out = append(out, groupStates[i])
		}
	}
	return out, nil
}

// checkGroupID refuses the empty group id before any request: Kafka
// answers it with INVALID_GROUP_ID, which says less.
func checkGroupID(group string) error {
	if group == "" {
		return errors.New("the group id is empty: give the consumer group's name")
	}
	return nil
}

func newGroupListCommand(o *clientOptions) *cobra.Command {
	var states []string
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List consumer groups with their state and protocol type",
		Args:  cobra.NoArgs,
		// Bad flags fail before the command connects.
		PreRunE: func(*cobra.Command, []string) error {
			_, err := parseGroupStates(states)
			return err
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			want, err := parseGroupStates(states)
			if err != nil {
				return err
			}
			listed, err := adm.ListGroups(ctx, want...)
			if err != nil {
				return fmt.Errorf("listing groups: %w", err)
			}
			list := groupList{Groups: []groupListEntry{}}
			for _, g := range listed.Sorted() {
				// A broker older than ListGroups v4 ignores the filter
				// (and sends no state): filter here too.
				if len(want) > 0 && !slices.Contains(want, g.State) {
					continue
				}
				list.Groups = append(list.Groups, groupListEntry{Group: g.Group, State: orNull(g.State), ProtocolType: orNull(g.ProtocolType)})
			}
			return printResult(cmd, output, list)
		}),
	}
	cmd.Flags().StringSliceVar(&states, "state", nil,
		"list only groups in this state (repeatable or comma-separated): "+strings.Join(groupStates, ", "))
	addOutputFlag(cmd, &output)
	return cmd
}

// groupList is group list -o json.
type groupList struct {
	Groups []groupListEntry `json:"groups"`
}

func (l groupList) printText(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "GROUP\tSTATE\tPROTOCOL-TYPE")
	for _, g := range l.Groups {
		fmt.Fprintf(w, "%s\t%s\t%s\n", g.Group, dashIfNull(g.State), dashIfNull(g.ProtocolType))
	}
	return w.Flush()
}

type groupListEntry struct {
	Group        string  `json:"group"`
	State        *string `json:"state"`         // null: the broker did not say
	ProtocolType *string `json:"protocol_type"` // null: none
}

// orNull is s, or nil for "": what text shows as "-", JSON shows as null.
func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func dashIfNull(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// describedGroup describes one group, or says it does not exist. Kafka
// answers an unknown group either with GROUP_ID_NOT_FOUND (DescribeGroups
// v6+) or, before that, as a group in state Dead with no error.
func describedGroup(ctx context.Context, adm *kadm.Client, group string) (kadm.DescribedGroup, bool, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, false, fmt.Errorf("describing group %q: %w", group, err)
	}
	d, err := described.On(group, nil)
	if err == nil {
		err = d.Err
	}
	switch {
	case errors.Is(err, kerr.GroupIDNotFound), err == nil && (d.State == "Dead" || d.State == ""):
		return d, false, nil
	case err != nil:
		return d, false, fmt.Errorf("describing group %q: %w", group, kafkaError(err, d.ErrMessage))
	}
	return d, true, nil
}

func groupNotFound(group string) error {
	return fmt.Errorf("group %q does not exist (fjord group list shows the groups there are)", group)
}

func newGroupDescribeCommand(o *clientOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group's state, members and assignments, and per partition its committed offset, log end offset and lag (records, bytes, time)",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			return checkGroupID(args[0])
		},
		RunE: clientRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, adm *kadm.Client, args []string) error {
			d, err := describeGroup(ctx, cl, adm, args[0])
			if err != nil {
				return err
			}
			if d.pausedErr != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "fjord: warning: paused partitions not known: %v\n", d.pausedErr)
			}
			return printResult(cmd, output, d)
		}),
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// groupDescription is what group describe shows; its JSON is group
// describe -o json.
type groupDescription struct {
	Group        string              `json:"group"`
	State        string              `json:"state"`
	ProtocolType *string             `json:"protocol_type"`
	Protocol     *string             `json:"protocol"`
	Coordinator  int32               `json:"coordinator"`
	Members      []groupMemberDesc   `json:"members"`
	Offsets      []groupPartitionRow `json:"offsets"`
	// Paused are the partitions the group paused at a poison record
	// (poison.go); null when they could not be read (pausedErr).
	Paused    []pausedPartition `json:"paused"`
	pausedErr error
}

type groupMemberDesc struct {
	MemberID   string  `json:"member_id"`
	InstanceID *string `json:"instance_id"`
	ClientID   *string `json:"client_id"`
	Host       *string `json:"host"`
	// Assignment is by topic; null for a group of another protocol type
	// (Kafka Connect, say), whose assignments are not the consumer's.
	Assignment []topicPartitions `json:"assignment"`
	text       string            // the assignment as text shows it
}

type topicPartitions struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// groupPartitionRow is one row of describe's partition table: every
// partition assigned to a member and every partition with a commit, as
// kafka-consumer-groups --describe has, with Fjord's lag in bytes and
// seconds and the records a retention gap lost (groupview.Row says what
// each is). Null: none, or not known.
type groupPartitionRow struct {
	Topic           string   `json:"topic"`
	Partition       int32    `json:"partition"`
	CommittedOffset *int64   `json:"committed_offset"`
	LogStartOffset  *int64   `json:"log_start_offset"`
	LogEndOffset    *int64   `json:"log_end_offset"`
	Lag             *int64   `json:"lag"`
	LagBytes        *int64   `json:"lag_bytes"`
	LagSeconds      *float64 `json:"lag_seconds"`
	RecordsLost     *int64   `json:"records_lost"`
	MemberID        *string  `json:"member_id"`
}

func describeGroup(ctx context.Context, cl *kgo.Client, adm *kadm.Client, group string) (*groupDescription, error) {
	d, exists, err := describedGroup(ctx, adm, group)
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, groupNotFound(group)
	}
	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
	}

	out := &groupDescription{
		Group: d.Group, State: d.State, ProtocolType: orNull(d.ProtocolType), Protocol: orNull(d.Protocol),
		Coordinator: d.Coordinator.NodeID, Members: []groupMemberDesc{}, Offsets: []groupPartitionRow{},
	}
	for _, m := range d.Members {
		md := groupMemberDesc{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: orNull(m.ClientID), Host: orNull(m.ClientHost), text: assignment(m.Assigned)}
		if a, ok := m.Assigned.AsConsumer(); ok {
			md.Assignment = []topicPartitions{}
			for _, t := range a.Topics {
				ps := slices.Clone(t.Partitions)
				slices.Sort(ps)
				md.Assignment = append(md.Assignment, topicPartitions{Topic: t.Topic, Partitions: nonNil(ps)})
			}
			sort.Slice(md.Assignment, func(i, j int) bool { return md.Assignment[i].Topic < md.Assignment[j].Topic })
		}
		out.Members = append(out.Members, md)
	}
	var commitErr error
	commits.Each(func(c kadm.OffsetResponse) {
		if c.Err != nil {
			commitErr = fmt.Errorf("committed offset of %s-%d: %w", c.Topic, c.Partition, c.Err)
		}
	})
	if commitErr != nil {
		return nil, fmt.Errorf("fetching the committed offsets of group %q: %w", group, commitErr)
	}
	rows, err := groupview.Rows(ctx, cl, adm, d, commits)
	if err != nil {
		return nil, fmt.Errorf("listing the end offsets of group %q's topics: %w", group, err)
	}
	for _, r := range rows {
		out.Offsets = append(out.Offsets, groupPartitionRow{Topic: r.Topic, Partition: r.Partition,
			CommittedOffset: r.Committed, LogStartOffset: r.LogStart, LogEndOffset: r.LogEnd, Lag: r.Lag,
			LagBytes: r.LagBytes, LagSeconds: r.LagSeconds, RecordsLost: r.Lost, MemberID: r.Member})
	}
	// Not fatal: the rest of the description stands without them.
	out.Paused, out.pausedErr = groupPauses(ctx, cl, group)
	return out, nil
}

func (d *groupDescription) printText(out io.Writer) error {
	fmt.Fprintf(out, "Group: %s\nState: %s\nProtocol type: %s\nProtocol: %s\nCoordinator: %d\nMembers: %d\n",
		d.Group, d.State, dashIfNull(d.ProtocolType), dashIfNull(d.Protocol), d.Coordinator, len(d.Members))
	if len(d.Members) > 0 {
		fmt.Fprintln(out)
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "MEMBER-ID\tINSTANCE-ID\tCLIENT-ID\tHOST\tASSIGNMENT")
		for _, m := range d.Members {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", m.MemberID, dashIfNull(m.InstanceID), dashIfNull(m.ClientID), dashIfNull(m.Host), m.text)
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	if len(d.Offsets) == 0 {
		fmt.Fprintln(out, "No committed offsets and no assigned partitions.")
		return d.printPausedSection(out)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tCOMMITTED\tLOG-END\tLAG\tLAG-BYTES\tLAG-TIME\tMEMBER-ID")
	for _, r := range d.Offsets {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Topic, r.Partition, dashIfNil(r.CommittedOffset), dashIfNil(r.LogEndOffset),
			dashIfNil(r.Lag), dashIfNil(r.LagBytes), lagTime(r.LagSeconds), dashIfNull(r.MemberID))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// A retention gap is said in words under the table: the group's
	// next read skips records it never saw.
	for _, r := range d.Offsets {
		if r.RecordsLost != nil && *r.RecordsLost > 0 {
			fmt.Fprintf(out, "\nGap on %s-%d: the committed offset %d is below the log start %d; %d records were deleted (retention or DeleteRecords) before this group read them.\n",
				r.Topic, r.Partition, *r.CommittedOffset, *r.LogStartOffset, *r.RecordsLost)
		}
	}
	return d.printPausedSection(out)
}

// printPausedSection ends the text with the paused partitions, if any.
func (d *groupDescription) printPausedSection(out io.Writer) error {
	switch {
	case d.pausedErr != nil:
		fmt.Fprintln(out, "\nPaused: not known (see the warning)")
	case len(d.Paused) > 0:
		return printPaused(out, d.Group, d.Paused)
	}
	return nil
}

// lagTime formats a lag in seconds for the table: "-" when not known,
// "0s" when caught up, else to the millisecond.
func lagTime(secs *float64) string {
	if secs == nil {
		return "-"
	}
	return (time.Duration(*secs*1000) * time.Millisecond).String()
}

func dashIfNil(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}

// assignment formats a member's assignment as topic:p,p topic:p; a
// group of another protocol type (Kafka Connect, say) shows its size.
func assignment(a kadm.GroupMemberAssignment) string {
	if c, ok := a.AsConsumer(); ok {
		var parts []string
		topics := slices.Clone(c.Topics)
		sort.Slice(topics, func(i, j int) bool { return topics[i].Topic < topics[j].Topic })
		for _, t := range topics {
			ps := slices.Clone(t.Partitions)
			slices.Sort(ps)
			s := make([]string, len(ps))
			for i, p := range ps {
				s[i] = strconv.Itoa(int(p))
			}
			parts = append(parts, t.Topic+":"+strings.Join(s, ","))
		}
		if len(parts) == 0 {
			return "-"
		}
		return strings.Join(parts, " ")
	}
	if raw, ok := a.Raw(); ok && len(raw) > 0 {
		return fmt.Sprintf("(%d bytes, not the consumer protocol)", len(raw))
	}
	return "-"
}

// resetOptions are the flags of group reset-offsets.
type resetOptions struct {
	topics     []string
	toEarliest bool
	toLatest   bool
	toOffset   int64
	toDatetime string
	shiftBy    int64
	byDuration string
	allTopics  bool
	dryRun     bool
	execute    bool
}

// resetTargets names the options that say where to reset to; exactly
// one is given.
var resetTargets = []string{"to-earliest", "to-latest", "to-offset", "to-datetime", "by-duration", "shift-by"}

const resetTargetsHelp = "--to-earliest, --to-latest, --to-offset N, --to-datetime T, --by-duration D or --shift-by N"

// resetTopic is one --topic: a topic and the partitions asked for (nil:
// all of them).
type resetTopic struct {
	topic      string
	partitions []int32
}

// parseResetTopics parses --topic TOPIC and --topic TOPIC:P,P,...; a
// topic given twice merges, and a topic given without partitions means
// all of them.
func parseResetTopics(specs []string) ([]resetTopic, error) {
	var out []resetTopic
	for _, spec := range specs {
		bad := fmt.Errorf("--topic %q: want TOPIC or TOPIC:PARTITION[,PARTITION...], e.g. orders or orders:0,2", spec)
		name, list, hasList := strings.Cut(strings.TrimSpace(spec), ":")
		if name == "" {
			return nil, bad
		}
		var ps []int32
		if hasList {
			for _, s := range strings.Split(list, ",") {
				p, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
				if err != nil || p < 0 {
					return nil, bad
				}
				ps = append(ps, int32(p))
			}
		}
		i := slices.IndexFunc(out, func(t resetTopic) bool { return t.topic == name })
		switch {
		case i < 0:
			out = append(out, resetTopic{topic: name, partitions: ps})
		case out[i].partitions == nil || ps == nil:
			out[i].partitions = nil
		default:
			out[i].partitions = append(out[i].partitions, ps...)
		}
	}
	for i := range out {
		slices.Sort(out[i].partitions)
		out[i].partitions = slices.Compact(out[i].partitions)
	}
	return out, nil
}

// check validates the flags without a node: exactly one target, the
// topics, the datetime.
func (r *resetOptions) check(cmd *cobra.Command, group string) ([]resetTopic, error) {
	if err := checkGroupID(group); err != nil {
		return nil, err
	}
	given := givenFlags(cmd, resetTargets...)
	switch {
	case len(given) == 0:
		return nil, errors.New("say where to move the offsets: give one of " + resetTargetsHelp)
	case len(given) > 1:
		return nil, fmt.Errorf("%s exclude each other: give one of %s", strings.Join(given, " and "), resetTargetsHelp)
	}
	if _, err := r.targetTime(cmd, time.Now()); err != nil {
		return nil, err
	}
	switch {
	case r.dryRun && r.execute:
		return nil, errors.New("--dry-run and --execute exclude each other: --dry-run only prints the plan, --execute commits it")
	case r.allTopics && len(r.topics) > 0:
		return nil, errors.New("--topic and --all-topics exclude each other: give one")
	case !r.allTopics && len(r.topics) == 0:
		return nil, errors.New("--topic is required: give TOPIC or TOPIC:PARTITION[,PARTITION...] (repeatable), e.g. --topic orders:0,2; " +
			"or --all-topics for every partition the group has an offset for")
	}
	return parseResetTopics(r.topics)
}

// targetTime is the time --to-datetime or --by-duration resets to; zero
// without either.
func (r *resetOptions) targetTime(cmd *cobra.Command, now time.Time) (time.Time, error) {
	switch {
	case cmd.Flags().Changed("to-datetime"):
		return parseDatetime("--to-datetime", r.toDatetime)
	case cmd.Flags().Changed("by-duration"):
		d, err := parseBackDuration(r.byDuration)
		if err != nil {
			return time.Time{}, fmt.Errorf("--by-duration %q: %v", r.byDuration, err)
		}
		// Kafka's tool: "reset offsets to offset by duration from
		// current timestamp", back in time.
		at := now.Add(-d)
		if at.UnixMilli() < 0 {
			return time.Time{}, fmt.Errorf("--by-duration %q goes back to before 1970-01-01T00:00:00Z, the earliest record timestamp; use --to-earliest", r.byDuration)
		}
		return at, nil
	}
	return time.Time{}, nil
}

func newGroupResetOffsetsCommand(o *clientOptions) *cobra.Command {
	var r resetOptions
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP (--topic TOPIC[:P,P...] | --all-topics) (--to-earliest | --to-latest | --to-offset N | --to-datetime T | --by-duration D | --shift-by N) [--execute]",
		Short: "Move a group's committed offsets: to the start, the end, an offset, a time, or by a shift",
		Long: `Move the committed offsets of GROUP for the partitions of each --topic (all of
its partitions, or only those listed after a colon), so that the group's next
consumer starts there:

  --to-earliest     the log start offset
  --to-latest       the log end offset
  --to-offset N     offset N
  --by-duration D   the first offset at or after D ago (as --to-datetime); D is
                    Go's 1h30m or Kafka's ISO 8601 PT1H30M, P1D (a day)
  --to-datetime T   the first offset whose record's timestamp is at or after T
                    (the log end if there is none); T is RFC 3339, e.g.
                    2024-05-01T12:00:00Z, local time 2024-05-01T14:00:00, or
                    milliseconds since 1970
  --shift-by N      the committed offset plus N (negative: back)

An offset outside a partition's log is moved to its log start or log end, as
kafka-consumer-groups does. The group must have no members: stop its
consumers first. --all-topics moves every partition the group has an offset
for, instead of --topic.

The plan (old and new offset per partition) is printed, and nothing is
committed without --execute, as with kafka-consumer-groups; --dry-run says so
explicitly.`,
		Args: cobra.ExactArgs(1),
		// Bad flags fail before the command connects.
		PreRunE: func(cmd *cobra.Command, args []string) error {
			_, err := r.check(cmd, args[0])
			return err
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error {
			topics, err := r.check(cmd, args[0])
			if err != nil {
				return err
			}
			return resetOffsets(ctx, cmd, adm, args[0], topics, &r)
		}),
	}
	f := cmd.Flags()
	f.StringArrayVar(&r.topics, "topic", nil, "TOPIC or TOPIC:PARTITION[,PARTITION...] whose offsets to move (repeatable)")
	addBoolFlag(f, &r.toEarliest, "to-earliest", false, "to the log start offset")
	addBoolFlag(f, &r.toLatest, "to-latest", false, "to the log end offset")
	f.Var(newIntFlag(&r.toOffset, 0, 0, math.MaxInt64, ""), "to-offset", "to this offset (kept within the log)")
	f.StringVar(&r.toDatetime, "to-datetime", "", "to the first record at or after this time: RFC 3339, local 2006-01-02T15:04:05, or ms since 1970")
	f.Var(newIntFlag(&r.shiftBy, 0, math.MinInt64, math.MaxInt64, "(negative: back, positive: forward)"), "shift-by", "by this many offsets from the committed offset (kept within the log)")
	f.StringVar(&r.byDuration, "by-duration", "", "to the first record at or after this long ago: 1h30m, or Kafka's PT1H30M, P1D")
	addBoolFlag(f, &r.allTopics, "all-topics", false, "every partition the group has a committed offset for, instead of --topic")
	addBoolFlag(f, &r.dryRun, "dry-run", false, "print the plan, commit nothing (also the default without --execute)")
	addBoolFlag(f, &r.execute, "execute", false, "commit the plan; without it nothing changes")
	return cmd
}

// resetPlan is one partition's move.
type resetPlan struct {
	topic     string
	partition int32
	old       int64 // -1: none committed
	new       int64
}

func resetOffsets(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, group string, topics []resetTopic, r *resetOptions) error {
	// Kafka's coordinator takes a commit without a member (generation -1)
	// only for a group without members; the check here says why in
	// words before the coordinator would refuse with UNKNOWN_MEMBER_ID.
	d, exists, err := describedGroup(ctx, adm, group)
	if err != nil {
		return err
	}
	if exists && (len(d.Members) > 0 || d.State != "Empty") {
		return fmt.Errorf("group %q has %s (state %s): stop its consumers first; offsets can be reset only while a group has no members",
			group, plural(int64(len(d.Members)), "member"), d.State)
	}

	commits, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return fmt.Errorf("fetching the committed offsets of group %q: %w", group, err)
	}
	if r.allTopics {
		// Kafka's --all-topics: the partitions the group has offsets
		// for.
		commits.Each(func(c kadm.OffsetResponse) {
			if c.Err != nil || c.At < 0 {
				return
			}
			i := slices.IndexFunc(topics, func(t resetTopic) bool { return t.topic == c.Topic })
			if i < 0 {
				topics, i = append(topics, resetTopic{topic: c.Topic, partitions: []int32{}}), len(topics)
			}
			topics[i].partitions = append(topics[i].partitions, c.Partition)
		})
		if len(topics) == 0 {
			return fmt.Errorf("group %q has no committed offsets for --all-topics to reset; name the partitions with --topic", group)
		}
		sort.Slice(topics, func(i, j int) bool { return topics[i].topic < topics[j].topic })
		for _, t := range topics {
			slices.Sort(t.partitions)
		}
	}

	// Every topic and partition named must exist before anything moves.
	var names []string
	for i, t := range topics {
		n, err := partitionCount(ctx, adm, t.topic)
		if err != nil {
			return err
		}
		if t.partitions == nil {
			for p := range n {
				topics[i].partitions = append(topics[i].partitions, p)
			}
		} else if last := t.partitions[len(t.partitions)-1]; last >= n {
			return fmt.Errorf("--topic %s: partition %d does not exist; topic %s has %d partitions (0 to %d)", t.topic, last, t.topic, n, n-1)
		}
		names = append(names, t.topic)
	}

	list := func(what string, fn func(context.Context, ...string) (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		l, err := fn(ctx, names...)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, fmt.Errorf("listing the %s offsets of %s: %w", what, strings.Join(names, ", "), err)
		}
		return l, nil
	}
	starts, err := list("start", adm.ListStartOffsets)
	if err != nil {
		return err
	}
	ends, err := list("end", adm.ListEndOffsets)
	if err != nil {
		return err
	}
	var byTime kadm.ListedOffsets
	at, err := r.targetTime(cmd, time.Now()) // checked in PreRunE
	if err != nil {
		return err
	}
	if !at.IsZero() {
		byTime, err = list("by-time", func(ctx context.Context, ts ...string) (kadm.ListedOffsets, error) {
			return adm.ListOffsetsAfterMilli(ctx, at.UnixMilli(), ts...)
		})
		if err != nil {
			return err
		}
	}

	var plan []resetPlan
	for _, t := range topics {
		for _, p := range t.partitions {
			start, _ := starts.Lookup(t.topic, p)
			end, _ := ends.Lookup(t.topic, p)
			old := int64(-1)
			if c, ok := commits.Lookup(t.topic, p); ok && c.Err == nil && c.At >= 0 {
				old = c.At
			}
			var target int64
			switch {
			case r.toEarliest:
				target = start.Offset
			case r.toLatest:
				target = end.Offset
			case cmd.Flags().Changed("to-offset"):
				target = r.toOffset
			case !at.IsZero():
				// No record at or after the time: the log end, where the
				// next record will be.
				target = end.Offset
				if o, ok := byTime.Lookup(t.topic, p); ok && o.Offset >= 0 {
					target = o.Offset
				}
			default: // --shift-by
				if old < 0 {
					return fmt.Errorf("--shift-by: group %q has no committed offset for %s-%d to shift from; use --to-earliest, --to-latest, --to-offset or --to-datetime",
						group, t.topic, p)
				}
				target = shift(old, r.shiftBy)
			}
			switch {
			case target < start.Offset:
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s-%d: offset %d is before the log start offset %d; using %d\n", t.topic, p, target, start.Offset, start.Offset)
				target = start.Offset
			case target > end.Offset:
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s-%d: offset %d is past the log end offset %d; using %d\n", t.topic, p, target, end.Offset, end.Offset)
				target = end.Offset
			}
			plan = append(plan, resetPlan{topic: t.topic, partition: p, old: old, new: target})
		}
	}

	out := cmd.OutOrStdout()
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tOLD-OFFSET\tNEW-OFFSET")
	for _, p := range plan {
		old := "-"
		if p.old >= 0 {
			old = strconv.FormatInt(p.old, 10)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\n", p.topic, p.partition, old, p.new)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if !r.execute {
		fmt.Fprintf(out, "dry run: nothing committed; add --execute to move the offsets of group %s\n", group)
		return nil
	}

	// Committed as a consumer outside the group would: no member id,
	// generation -1, no leader epoch (the old one does not describe the
	// new position).
	offsets := make(kadm.Offsets)
	for _, p := range plan {
		offsets.Add(kadm.Offset{Topic: p.topic, Partition: p.partition, At: p.new, LeaderEpoch: -1})
	}
	committed, err := adm.CommitOffsets(ctx, group, offsets)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		if errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) || errors.Is(err, kerr.RebalanceInProgress) {
			return fmt.Errorf("committing the offsets of group %q: %w (a consumer joined the group meanwhile: stop its consumers first)", group, err)
		}
		return fmt.Errorf("committing the offsets of group %q: %w", group, err)
	}
	fmt.Fprintf(out, "moved the offsets of group %s for %s\n", group, plural(int64(len(plan)), "partition"))
	return nil
}

// shift adds n to offset without wrapping around; the result is clamped
// to the log afterwards.
func shift(offset, n int64) int64 {
	switch {
	case n > 0 && offset > math.MaxInt64-n:
		return math.MaxInt64
	case n < 0 && offset < math.MinInt64-n:
		return math.MinInt64
	}
	return offset + n
}

func newGroupDeleteCommand(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP",
		Short: "Delete a group without members and its committed offsets",
		Args:  cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			return checkGroupID(args[0])
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error {
			group := args[0]
			resp, err := adm.DeleteGroup(ctx, group)
			switch {
			case errors.Is(err, kerr.GroupIDNotFound):
				return groupNotFound(group)
			case errors.Is(err, kerr.NonEmptyGroup):
				return fmt.Errorf("cannot delete group %q while it has members (stop its consumers first): %w", group, kafkaError(err, resp.ErrMessage))
			case err != nil:
				return fmt.Errorf("deleting group %q: %w", group, kafkaError(err, resp.ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted group %s\n", group)
			return nil
		}),
	}
}
