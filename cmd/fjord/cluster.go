package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func newClusterCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Inspect the cluster",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	var output string
	describe := &cobra.Command{
		Use:   "describe",
		Short: "Show the cluster id, the active controller, the controller quorum and the brokers",
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
			adm := kadm.NewClient(cl)
			meta, err := adm.BrokerMetadata(ctx)
			if err != nil {
				return fmt.Errorf("describing cluster: %w", err)
			}
			d := clusterDescription{ClusterID: meta.Cluster, Brokers: []brokerDescription{}}
			if meta.Controller >= 0 {
				d.Controller = &meta.Controller
			}
			for _, b := range meta.Brokers {
				bd := brokerDescription{NodeID: b.NodeID, Host: b.Host, Port: b.Port}
				if b.Rack != nil && *b.Rack != "" {
					bd.Rack = b.Rack
				}
				d.Brokers = append(d.Brokers, bd)
			}
			q, err := describeQuorum(ctx, cl)
			if err != nil {
				return fmt.Errorf("describing the controller quorum: %w", err)
			}
			d.Quorum = q
			return printResult(cmd, output, d)
		},
	}
	addOutputFlag(describe, &output)
	cmd.AddCommand(describe)
	return cmd
}

// clusterDescription is cluster describe -o json.
type clusterDescription struct {
	ClusterID  string              `json:"cluster_id"`
	Controller *int32              `json:"controller"` // null: no active controller
	Brokers    []brokerDescription `json:"brokers"`
	Quorum     quorumDescription   `json:"quorum"`
}

// quorumDescription is the controller quorum as the answering node's
// DescribeQuorum has it.
type quorumDescription struct {
	Leader        *int32  `json:"leader"` // null: none known
	Epoch         int32   `json:"epoch"`
	HighWatermark int64   `json:"high_watermark"`
	Voters        []int32 `json:"voters"`
}

// describeQuorum asks for the metadata log's quorum (DescribeQuorum).
func describeQuorum(ctx context.Context, cl *kgo.Client) (quorumDescription, error) {
	q := quorumDescription{Voters: []int32{}}
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{kmsg.NewDescribeQuorumRequestTopicPartition()}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
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
	for _, v := range p.CurrentVoters {
		q.Voters = append(q.Voters, v.ReplicaID)
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
	voters := make([]string, len(d.Quorum.Voters))
	for i, v := range d.Quorum.Voters {
		voters[i] = strconv.Itoa(int(v))
	}
	fmt.Fprintf(out, "Controller quorum: voters %s, epoch %d, high watermark %d\n",
		strings.Join(voters, ", "), d.Quorum.Epoch, d.Quorum.HighWatermark)
	fmt.Fprintf(out, "Brokers: %d\n", len(d.Brokers))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tHOST\tPORT\tRACK")
	for _, b := range d.Brokers {
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", b.NodeID, b.Host, b.Port, dashIfNull(b.Rack))
	}
	return w.Flush()
}

type brokerDescription struct {
	NodeID int32   `json:"node_id"`
	Host   string  `json:"host"`
	Port   int32   `json:"port"`
	Rack   *string `json:"rack"`
}
