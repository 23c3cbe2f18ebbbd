package main

import (
	"github.com/spf13/cobra"

	"github.com/fjordmq/fjord/internal/bench/report"
)

func newBenchReportCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "report DIR",
		Short: "Print Markdown tables of one sitting's results, with the targets",
		Long: `Print, as Markdown, the results found under DIR (the JSON files that
"fjord bench limits", "fjord bench run" and "fjord bench peer" write): the
machine's limits, each system's figures as medians over its runs that passed
their checks, and every benchmark target as a ratio within the sitting.
scripts/bench.sh uses it to regenerate BENCHMARKS.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := report.Load(args[0])
			if err != nil {
				return err
			}
			s.Write(cmd.OutOrStdout())
			return nil
		},
	}
}
