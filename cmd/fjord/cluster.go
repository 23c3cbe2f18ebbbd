package main

import (
	"context"
	"fmt"
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
	cmd.AddCommand(&cobra.Command{
		Use:   "describe",
		Short: "Show the cluster id, the active controller and the brokers",
		Args:  cobra.NoArgs,
		RunE: adminRun(&o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			meta, err := adm.BrokerMetadata(ctx)
			if err != nil {
				return fmt.Errorf("describing cluster: %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Cluster ID: %s\n", meta.Cluster)
			if meta.Controller < 0 {
				fmt.Fprintln(out, "Controller: none (no active controller)")
			} else {
				fmt.Fprintf(out, "Controller: %d\n", meta.Controller)
			}
			fmt.Fprintf(out, "Brokers: %d\n", len(meta.Brokers))
			w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tHOST\tPORT\tRACK")
			for _, b := range meta.Brokers {
				rack := "-"
				if b.Rack != nil && *b.Rack != "" {
					rack = *b.Rack
				}
				fmt.Fprintf(w, "%d\t%s\t%d\t%s\n", b.NodeID, b.Host, b.Port, rack)
			}
			return w.Flush()
		}),
	})
	return cmd
}
