package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/kafkaserver"
)

func newClusterCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect the cluster, elect partition leaders, change the controller quorum",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	var output string
	describe := &cobra.Command{
		Use:   "describe",
		Short: "Show the cluster: controller, quorum and lag, brokers and their state, partitions in trouble, reassignments",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			d, err := describeCluster(ctx, cl)
			if err != nil {
				return fmt.Errorf("describing cluster: %w", err)
			}
			// The active controller knows how far every node has
			// the metadata log (from their heartbeats); others do not.
			q, err := describeQuorumAt(ctx, cl, d.Controller)
			if err != nil && d.Controller != nil {
				q, err = describeQuorum(ctx, cl) // any node: no lag, but the quorum
			}
			if err != nil {
				return fmt.Errorf("describing the controller quorum: %w", err)
			}
			d.Quorum = q
			if d.Partitions, err = describePartitionHealth(ctx, cl); err != nil {
				return err
			}
			return printResult(cmd, output, d)
		},
	}
	addOutputFlag(describe, &output)
	cmd.AddCommand(describe, newElectLeadersCommand(&o), newRebalanceCommand(&o), newDrainCommand(&o))
	cmd.AddCommand(newVoterCommands(&o)...)
	return cmd
}

// clusterDescription is cluster describe -o json.
type clusterDescription struct {
	ClusterID  string              `json:"cluster_id"`
	Controller *int32              `json:"controller"` // null: no active controller
	Brokers    []brokerDescription `json:"brokers"`
	Quorum     quorumDescription   `json:"quorum"`
	Partitions partitionHealth     `json:"partitions"`

	// describeClusterVersion is the DescribeCluster version the node
	// answered; below 2 it could not list fenced brokers (text output
	// says so; the JSON has no field for it: a script sees every broker
	// it lists as unfenced, which they are).
	describeClusterVersion int16
}

// describeCluster asks a node for the cluster id, the controller and the
// registered brokers with DescribeCluster. The request always sets
// IncludeFencedBrokers: kgo sends the highest version both sides serve
// (ApiVersions), so a node serving v2 (KIP-1073) lists its fenced
// brokers too, marked, and one serving only v0-1 gets a request without
// the field and lists its unfenced brokers only. Metadata, which this
// command asked before, cannot list fenced brokers at any version; every
// Fjord node serves DescribeCluster, so there is no Metadata fallback.
func describeCluster(ctx context.Context, cl *kgo.Client) (clusterDescription, error) {
	d := clusterDescription{Brokers: []brokerDescription{}}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.IncludeFencedBrokers = true
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return d, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		message := ""
		if resp.ErrorMessage != nil {
			message = *resp.ErrorMessage
		}
		return d, kafkaError(err, message)
	}
	d.ClusterID, d.describeClusterVersion = resp.ClusterID, resp.GetVersion()
	if resp.ControllerID >= 0 {
		d.Controller = &resp.ControllerID
	}
	for _, b := range resp.Brokers {
		bd := brokerDescription{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Fenced: b.IsFenced}
		b.UnknownTags.Each(func(tag uint32, v []byte) {
			if tag == kafkaserver.ShuttingDownTag && len(v) == 1 && v[0] == 1 {
				bd.ShuttingDown = true
			}
		})
		if b.Rack != nil && *b.Rack != "" {
			bd.Rack = b.Rack
		}
		d.Brokers = append(d.Brokers, bd)
	}
	slices.SortFunc(d.Brokers, func(a, b brokerDescription) int { return cmp.Compare(a.NodeID, b.NodeID) })
	return d, nil
}

// quorumDescription is the controller quorum as the answering node's
// DescribeQuorum has it.
type quorumDescription struct {
	Leader        *int32  `json:"leader"` // null: none known
	Epoch         int32   `json:"epoch"`
	HighWatermark int64   `json:"high_watermark"`
	Voters        []int32 `json:"voters"`
	// Observers are the broker-only nodes, which follow the metadata
	// log without a vote.
	Observers []int32 `json:"observers"`
	// Replicas are the voters then the observers with how far each has
	// the log (null when the answering node does not know: only the
	// active controller does) and its lag behind the high watermark.
	Replicas []quorumReplica `json:"replicas"`
}

type quorumReplica struct {
	NodeID       int32  `json:"node_id"`
	Voter        bool   `json:"voter"`
	LogEndOffset *int64 `json:"log_end_offset"`
	Lag          *int64 `json:"lag"`
}

// describeQuorum asks any node for the metadata log's quorum
// (DescribeQuorum).
func describeQuorum(ctx context.Context, cl *kgo.Client) (quorumDescription, error) {
	return describeQuorumAt(ctx, cl, nil)
}

// describeQuorumAt asks node (nil: any) for the quorum.
func describeQuorumAt(ctx context.Context, cl *kgo.Client, node *int32) (quorumDescription, error) {
	q := quorumDescription{Voters: []int32{}, Observers: []int32{}, Replicas: []quorumReplica{}}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	var resp *kmsg.DescribeQuorumResponse
	var err error
	if node != nil {
		var r kmsg.Response
		if r, err = cl.Broker(int(*node)).Request(ctx, req); err == nil {
			resp = r.(*kmsg.DescribeQuorumResponse)
		}
	} else {
		resp, err = req.RequestWith(ctx, cl)
	}
	if err != nil {
		return q, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return q, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return q, fmt.Errorf("the answer describes %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return q, err
	}
	if p.LeaderID >= 0 {
		q.Leader = &p.LeaderID
	}
	q.Epoch, q.HighWatermark = p.LeaderEpoch, p.HighWatermark
	member := func(v kmsg.DescribeQuorumResponseTopicPartitionReplicaState, voter bool) {
		r := quorumReplica{NodeID: v.ReplicaID, Voter: voter}
		if v.LogEndOffset >= 0 {
			end, lag := v.LogEndOffset, max(p.HighWatermark-v.LogEndOffset, 0)
			r.LogEndOffset, r.Lag = &end, &lag
		}
		q.Replicas = append(q.Replicas, r)
	}
	for _, v := range p.CurrentVoters {
		q.Voters = append(q.Voters, v.ReplicaID)
		member(v, true)
	}
	for _, o := range p.Observers {
		q.Observers = append(q.Observers, o.ReplicaID)
		member(o, false)
	}
	return q, nil
}

func (d clusterDescription) printText(out io.Writer) error {
	fmt.Fprintf(out, "Cluster ID: %s\n", d.ClusterID)
	if d.Controller == nil {
		fmt.Fprintln(out, "Controller: none (no active controller)")
	} else {
		fmt.Fprintf(out, "Controller: %d\n", *d.Controller)
	}
	members := "voters " + joinIDs(d.Quorum.Voters)
	if len(d.Quorum.Observers) > 0 {
		members += ", observers " + joinIDs(d.Quorum.Observers)
	}
	fmt.Fprintf(out, "Controller quorum: %s, epoch %d, high watermark %d\n",
		members, d.Quorum.Epoch, d.Quorum.HighWatermark)
	var lags []string
	for _, r := range d.Quorum.Replicas {
		if r.Lag != nil {
			lags = append(lags, fmt.Sprintf("%d: %d", r.NodeID, *r.Lag))
		} else {
			lags = append(lags, fmt.Sprintf("%d: unknown", r.NodeID))
		}
	}
	if len(lags) > 0 {
		fmt.Fprintf(out, "Metadata log lag (records behind the high watermark): %s\n", strings.Join(lags, ", "))
	}
	fenced := 0
	for _, b := range d.Brokers {
		if b.Fenced {
			fenced++
		}
	}
	switch {
	case d.describeClusterVersion < 2:
		fmt.Fprintf(out, "Brokers: %d (fenced brokers not listed: the node answers DescribeCluster v%d, which cannot)\n",
			len(d.Brokers), d.describeClusterVersion)
	case fenced > 0:
		fmt.Fprintf(out, "Brokers: %d (%d fenced)\n", len(d.Brokers), fenced)
	default:
		fmt.Fprintf(out, "Brokers: %d\n", len(d.Brokers))
	}
	// STATE as Kafka's kafka-cluster.sh list-endpoints shows it.
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tHOST\tPORT\tRACK\tSTATE")
	for _, b := range d.Brokers {
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", b.NodeID, b.Host, b.Port, dashIfNull(b.Rack), b.state())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return d.Partitions.printText(out)
}

// state is the broker's STATE: Kafka's kafka-cluster.sh words (fenced,
// unfenced), and shutting down for a broker in controlled shutdown.
func (b brokerDescription) state() string {
	switch {
	case b.Fenced:
		return "fenced"
	case b.ShuttingDown:
		return "shutting down"
	}
	return "unfenced"
}

type brokerDescription struct {
	NodeID int32   `json:"node_id"`
	Host   string  `json:"host"`
	Port   int32   `json:"port"`
	Rack   *string `json:"rack"`
	// Fenced: the broker is registered but its session lapsed (or it
	// has not caught up since registering); it leads nothing and
	// clients are not sent to it.
	Fenced bool `json:"fenced"`
	// ShuttingDown: the broker's process is in controlled shutdown
	// (moving its leaderships away); a second or two at most.
	ShuttingDown bool `json:"shutting_down"`
}

// joinIDs is ids as "1, 2, 3".
func joinIDs(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ", ")
}
