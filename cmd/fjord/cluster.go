package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
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
		Short: "Show the cluster id, the active controller and the brokers",
		Args:  cobra.NoArgs,
		RunE: adminRun(&o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
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
			return printResult(cmd, output, d)
		}),
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
}

func (d clusterDescription) printText(out io.Writer) error {
	fmt.Fprintf(out, "Cluster ID: %s\n", d.ClusterID)
	if d.Controller == nil {
		fmt.Fprintln(out, "Controller: none (no active controller)")
	} else {
		fmt.Fprintf(out, "Controller: %d\n", *d.Controller)
	}
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
