package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
)

func newTopicCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "topic",
		Short: "Create, list, describe, alter, reassign, migrate and delete topics",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	cmd.AddCommand(
		newTopicCreateCommand(&o),
		newTopicListCommand(&o),
		newTopicDescribeCommand(&o),
		newTopicDeleteCommand(&o),
		newTopicAlterCommand(&o),
		newTopicReassignCommand(&o),
		newTopicMigrateCommand(&o),
	)
	return cmd
}

// adminRun wraps a topic or cluster subcommand: it reads FJORD_BROKERS,
// connects, and bounds the whole call by requestTimeout.
func adminRun(o *clientOptions, fn func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error) func(*cobra.Command, []string) error {
	return clientRun(o, func(ctx context.Context, cmd *cobra.Command, _ *kgo.Client, adm *kadm.Client, args []string) error {
		return fn(ctx, cmd, adm, args)
	})
}

// clientRun is adminRun for a command that also sends requests kadm has
// no call for (Fjord's own, say) through the client under adm.
func clientRun(o *clientOptions, fn func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, adm *kadm.Client, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := o.applyEnv(cmd); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
		defer cancel()
		cl, err := o.connect(ctx)
		if err != nil {
			return err
		}
		defer cl.Close()
		return fn(ctx, cmd, cl, newAdmin(cl), args)
	}
}

// parseConfigs turns repeated --config key=value flags into a map.
func parseConfigs(kvs []string) (map[string]*string, error) {
	out := map[string]*string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("--config %q: want key=value, e.g. retention.ms=86400000", kv)
		}
		out[strings.TrimSpace(k)] = kadm.StringPtr(v)
	}
	return out, nil
}

func newTopicCreateCommand(o *clientOptions) *cobra.Command {
	var (
		partitions  int32
		replication int16
		configs     []string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a topic",
		Long: `Create a topic.

Records with the same key go to the same partition only while the partition
count stays the same: choose it up front if key order matters.`,
		Args: cobra.ExactArgs(1),
		// Bad flags fail before the command connects.
		PreRunE: func(*cobra.Command, []string) error {
			_, err := parseConfigs(configs)
			return err
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error {
			cfgs, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			// Not given: the node's defaults (num.partitions,
			// default.replication.factor), which CreateTopics spells -1.
			// 0 is refused by the flags rather than taken to mean the
			// default: it reads as a count, and a silent 1 surprises.
			p, rf := int32(-1), int16(-1)
			if cmd.Flags().Changed("partitions") {
				p = partitions
			}
			if cmd.Flags().Changed("replication-factor") {
				rf = replication
			}
			resp, err := adm.CreateTopic(ctx, p, rf, cfgs, args[0])
			if err != nil {
				return fmt.Errorf("creating topic %q: %w", args[0], kafkaError(err, resp.ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created topic %s (%s, replication factor %d)\n",
				resp.Topic, plural(int64(resp.NumPartitions), "partition"), resp.ReplicationFactor)
			return nil
		}),
	}
	cmd.Flags().Var(newIntFlag(&partitions, 0, 1, math.MaxInt32, "(default: the node's num-partitions)"), "partitions", "number of partitions (default: the node's num-partitions)")
	cmd.Flags().Var(newIntFlag(&replication, 0, 1, math.MaxInt16, "(default: the node's default-replication-factor)"), "replication-factor", "replicas per partition (default: the node's default-replication-factor, at most the brokers there are)")
	cmd.Flags().StringArrayVar(&configs, "config", nil, "topic config override key=value (repeatable), e.g. retention.ms=86400000")
	return cmd
}

func newTopicListCommand(o *clientOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List topics",
		Args:  cobra.NoArgs,
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			topics, err := adm.ListTopics(ctx)
			if err != nil {
				return fmt.Errorf("listing topics: %w", err)
			}
			list := topicList{Topics: []topicListEntry{}}
			for _, name := range topics.Names() {
				d := topics[name]
				list.Topics = append(list.Topics, topicListEntry{
					Name: name, ID: metadata.UUID(d.ID).Base64(), Partitions: len(d.Partitions), ReplicationFactor: d.Partitions.NumReplicas(),
				})
			}
			return printResult(cmd, output, list)
		}),
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// topicList is topic list -o json.
type topicList struct {
	Topics []topicListEntry `json:"topics"`
}

func (l topicList) printText(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITIONS\tREPLICATION-FACTOR")
	for _, t := range l.Topics {
		fmt.Fprintf(w, "%s\t%d\t%d\n", t.Name, t.Partitions, t.ReplicationFactor)
	}
	return w.Flush()
}

type topicListEntry struct {
	Name              string `json:"name"`
	ID                string `json:"id"` // base64url, as Kafka's tools print it
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
}

func newTopicDescribeCommand(o *clientOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "describe NAME",
		Short: "Show a topic's partitions, leaders, replicas, offsets and config overrides",
		Long: `Show a topic's partitions, leaders, replicas, offsets and config overrides.

Per partition: its leader and leader epoch, its replicas (the first is the
preferred leader), the in-sync replicas (ISR), the log's start and end
offsets, and a status: ok, or one or more of
  offline               no leader: the partition takes no reads or writes
  under-min-isr         fewer in sync than min.insync.replicas: acks=all
                        writes are refused (NOT_ENOUGH_REPLICAS)
  under-replicated      some replicas are not in sync
  replica-offline       a replica's broker is not registered
  leader-not-preferred  led by a replica other than the first`,
		Args: cobra.ExactArgs(1),
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error {
			d, err := describeTopic(ctx, adm, args[0])
			if err != nil {
				return err
			}
			return printResult(cmd, output, d)
		}),
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// topicDescription is what topic describe shows; its JSON is topic
// describe -o json.
type topicDescription struct {
	Name              string `json:"name"`
	ID                string `json:"id"`
	ReplicationFactor int    `json:"replication_factor"`
	// MinInsyncReplicas is the min.insync.replicas in force, override or
	// default (null if the server did not describe it), and
	// MinInsyncReplicasSource where it comes from: "topic" (an override),
	// "default" or "broker" (a broker's setting, on Kafka). The default
	// depends on the replication factor on Fjord, so it is shown even
	// though defaults are left out of Configs.
	MinInsyncReplicas       *int   `json:"min_insync_replicas"`
	MinInsyncReplicasSource string `json:"min_insync_replicas_source,omitempty"`
	// Configs are the topic's overrides; defaults are left out.
	Configs    map[string]string      `json:"configs"`
	Partitions []partitionDescription `json:"partitions"`
}

type partitionDescription struct {
	Partition   int32 `json:"partition"`
	Leader      int32 `json:"leader"` // -1: none
	LeaderEpoch int32 `json:"leader_epoch"`
	// Replicas, the first being the preferred leader; ISR, the in-sync
	// ones; OfflineReplicas, those whose broker is not registered.
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas"`
	// Status lists what is wrong with the partition (partitionStatus),
	// empty when nothing is.
	Status []string `json:"status"`
	// The offsets are null when they could not be listed; Error says
	// why.
	LogStartOffset *int64 `json:"log_start_offset"`
	LogEndOffset   *int64 `json:"log_end_offset"`
	Error          string `json:"error,omitempty"`
}

// partitionStatus says what is wrong with a partition, worst first, in
// the words of Kafka's describe filters and metrics (offline, under min
// ISR, under-replicated) and its preferred-leader imbalance; none when
// nothing is. minISR < 1 means not known (no under-min-isr then).
func partitionStatus(leader int32, replicas, isr, offline []int32, minISR int) []string {
	status := []string{}
	if leader < 0 {
		status = append(status, "offline")
	}
	if minISR > 0 && len(isr) < minISR {
		status = append(status, "under-min-isr")
	}
	if len(isr) < len(replicas) {
		status = append(status, "under-replicated")
	}
	if len(offline) > 0 {
		status = append(status, "replica-offline")
	}
	if leader >= 0 && len(replicas) > 0 && leader != replicas[0] {
		status = append(status, "leader-not-preferred")
	}
	return status
}

func describeTopic(ctx context.Context, adm *kadm.Client, topic string) (*topicDescription, error) {
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describing topic %q: %w", topic, err)
	}
	d, ok := topics[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("topic %q does not exist", topic)
	}
	if d.Err != nil {
		return nil, fmt.Errorf("describing topic %q: %w", topic, d.Err)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing start offsets of %q: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets of %q: %w", topic, err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describing configs of %q: %w", topic, err)
	}
	rc, err := configs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, fmt.Errorf("describing configs of %q: %w", topic, kafkaError(err, rc.ErrMessage))
	}
	out := &topicDescription{
		Name: topic, ID: metadata.UUID(d.ID).Base64(), ReplicationFactor: d.Partitions.NumReplicas(),
		Configs: map[string]string{}, Partitions: []partitionDescription{},
	}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && c.Value != nil {
			out.Configs[c.Key] = *c.Value
		}
		if c.Key == "min.insync.replicas" && c.Value != nil {
			if n, err := strconv.Atoi(*c.Value); err == nil {
				out.MinInsyncReplicas = &n
				out.MinInsyncReplicasSource = configSourceName(c.Source)
			}
		}
	}
	minISR := 0
	if out.MinInsyncReplicas != nil {
		minISR = *out.MinInsyncReplicas
	}
	for _, p := range d.Partitions.Sorted() {
		pd := partitionDescription{
			Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), OfflineReplicas: nonNil(p.OfflineReplicas),
			Status: partitionStatus(p.Leader, p.Replicas, p.ISR, p.OfflineReplicas, minISR),
		}
		offset := func(l kadm.ListedOffsets) *int64 {
			o, ok := l.Lookup(topic, p.Partition)
			switch {
			case !ok:
				pd.Error = "no offsets listed for the partition"
			case o.Err != nil:
				pd.Error = o.Err.Error()
			default:
				return &o.Offset
			}
			return nil
		}
		pd.LogStartOffset, pd.LogEndOffset = offset(starts), offset(ends)
		out.Partitions = append(out.Partitions, pd)
	}
	return out, nil
}

func (d *topicDescription) printText(out io.Writer) error {
	overrides := make([]string, 0, len(d.Configs))
	for k, v := range d.Configs {
		overrides = append(overrides, k+"="+v)
	}
	sort.Strings(overrides)
	fmt.Fprintf(out, "Topic: %s\nTopic ID: %s\nPartitions: %d\nReplication factor: %d\n",
		d.Name, d.ID, len(d.Partitions), d.ReplicationFactor)
	if d.MinInsyncReplicas != nil {
		fmt.Fprintf(out, "Min in-sync replicas: %d (%s)\n", *d.MinInsyncReplicas, d.MinInsyncReplicasSource)
	}
	if len(overrides) == 0 {
		fmt.Fprintln(out, "Configs: (defaults)")
	} else {
		fmt.Fprintf(out, "Configs: %s\n", strings.Join(overrides, " "))
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	// STATUS last: it is the one column of words, and scripts that cut
	// the columns before it keep working.
	fmt.Fprintln(w, "PARTITION\tLEADER\tEPOCH\tREPLICAS\tISR\tLOG-START\tLOG-END\tSTATUS")
	for _, p := range d.Partitions {
		offset := func(o *int64) string {
			if o == nil {
				// One field, so the columns after it stay in place.
				return "error"
			}
			return fmt.Sprint(*o)
		}
		status := "ok"
		if len(p.Status) > 0 {
			status = strings.Join(p.Status, ",")
		}
		fmt.Fprintf(w, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Partition, p.Leader, p.LeaderEpoch,
			orNone(ids(p.Replicas)), orNone(ids(p.ISR)), offset(p.LogStartOffset), offset(p.LogEndOffset), status)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// The offsets' errors, which would not fit a column.
	for _, p := range d.Partitions {
		if p.Error != "" {
			fmt.Fprintf(out, "partition %d: %s\n", p.Partition, p.Error)
		}
	}
	return nil
}

// orNone is s, or "none" for an empty list, so a row keeps its columns
// ("-" is the CLI's word for null).
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// configSourceName names where a config's value comes from, for topic
// describe.
func configSourceName(s kmsg.ConfigSource) string {
	switch s {
	case kmsg.ConfigSourceDynamicTopicConfig:
		return "topic"
	case kmsg.ConfigSourceDefaultConfig:
		return "default"
	default:
		return "broker"
	}
}

// nonNil makes an empty list JSON's [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// plural is "1 record", "2 records".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func ids(v []int32) string {
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}

func newTopicDeleteCommand(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a topic and all its records",
		Args:  cobra.ExactArgs(1),
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error {
			resp, err := adm.DeleteTopic(ctx, args[0])
			if err == nil {
				err = resp.Err
			}
			if errors.Is(err, kerr.UnknownTopicOrPartition) {
				return fmt.Errorf("topic %q does not exist", args[0])
			}
			if err != nil {
				return fmt.Errorf("deleting topic %q: %w", args[0], kafkaError(err, resp.ErrMessage))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted topic %s\n", args[0])
			return nil
		}),
	}
}

func newTopicAlterCommand(o *clientOptions) *cobra.Command {
	var (
		partitions    int32
		configs       []string
		deleteConfigs []string
		allowKeyRemap bool
	)
	cmd := &cobra.Command{
		Use:   "alter NAME",
		Short: "Add partitions to a topic or change its configs",
		Long: `Add partitions to a topic (--partitions, the new total) or set and remove
config overrides (--config key=value, --delete-config key).

Adding partitions changes which partition a key maps to: records with a key
written before and after the change may be in different partitions, so per-key
order no longer holds across the change. So on a topic that has records with
keys, --partitions is refused unless --allow-key-remap is given; to grow such a
topic keeping each key's order, copy it to a new one with
"fjord topic migrate SRC DST --partitions N". (Kafka clients and tools that add
partitions through the Kafka API are not refused; the node logs each such grow
and counts it in fjord_partitions_added_to_keyed_topics_total.)`,
		Args: cobra.ExactArgs(1),
		// Bad flags fail before the command connects.
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := parseConfigs(configs); err != nil {
				return err
			}
			if !cmd.Flags().Changed("partitions") && len(configs) == 0 && len(deleteConfigs) == 0 {
				return errors.New("nothing to change: give --partitions, --config or --delete-config")
			}
			return nil
		},
		RunE: clientRun(o, func(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, adm *kadm.Client, args []string) error {
			topic := args[0]
			set, err := parseConfigs(configs)
			if err != nil {
				return err
			}
			current, err := partitionCount(ctx, adm, topic)
			if err != nil {
				return err
			}
			// Counts that cannot be are refused before any config changes.
			grow := cmd.Flags().Changed("partitions")
			switch {
			case grow && partitions == current:
				return fmt.Errorf("--partitions %d: topic %s already has %s; give a larger count to add partitions",
					partitions, topic, plural(int64(current), "partition"))
			case grow && partitions < current:
				return fmt.Errorf("--partitions %d: topic %s has %d partitions and partitions cannot be removed; give a larger count",
					partitions, topic, current)
			}
			out := cmd.OutOrStdout()
			refused := func(err error) error {
				if errors.Is(err, fjordmsg.ErrKeyedTopic) {
					return keyedRefusal(topic, current, partitions)
				}
				return fmt.Errorf("adding partitions to %q: %w", topic, err)
			}
			if grow && (len(set) > 0 || len(deleteConfigs) > 0) {
				// A refusal of the grow must come before the configs
				// change, so that it changes nothing.
				if err := growPartitions(ctx, cl, topic, partitions, allowKeyRemap, true); err != nil {
					return refused(err)
				}
			}
			if len(set) > 0 || len(deleteConfigs) > 0 {
				var alters []kadm.AlterConfig
				keys := make([]string, 0, len(set))
				for k := range set {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: set[k]})
				}
				for _, k := range deleteConfigs {
					alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
				}
				resps, err := adm.AlterTopicConfigs(ctx, alters, topic)
				if err != nil {
					return fmt.Errorf("altering configs of %q: %w", topic, err)
				}
				r, err := resps.On(topic, nil)
				if err == nil {
					err = r.Err
				}
				if err != nil {
					return fmt.Errorf("altering configs of %q: %w", topic, kafkaError(err, r.ErrMessage))
				}
				fmt.Fprintf(out, "altered configs of topic %s\n", topic)
			}
			if grow {
				if err := growPartitions(ctx, cl, topic, partitions, allowKeyRemap, false); err != nil {
					return refused(err)
				}
				// Said once it is true: a count the node refuses grows
				// nothing. Without --allow-key-remap the node has just
				// said the topic has no keyed records, so nothing moved.
				if allowKeyRemap {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: growing %s from %d to %d partitions changes which partition a key maps to; "+
						"records with the same key written before and after may be in different partitions, so per-key order breaks across this change\n",
						topic, current, partitions)
				}
				fmt.Fprintf(out, "topic %s now has %s\n", topic, plural(int64(partitions), "partition"))
			}
			return nil
		}),
	}
	cmd.Flags().Var(newIntFlag(&partitions, 0, 1, math.MaxInt32, ""), "partitions", "new total number of partitions (only grows)")
	cmd.Flags().StringArrayVar(&configs, "config", nil, "set a config override key=value (repeatable)")
	cmd.Flags().StringArrayVar(&deleteConfigs, "delete-config", nil, "remove a config override, back to the default (repeatable)")
	cmd.Flags().BoolVar(&allowKeyRemap, "allow-key-remap", false,
		"with --partitions, grow a topic that has keyed records anyway (existing keys move to other partitions)")
	return cmd
}
