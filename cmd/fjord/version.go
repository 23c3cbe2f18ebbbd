package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/fjordmq/fjord/internal/buildinfo"
)

// fjord version and fjord --version print the same line: the module
// version, the commit the binary was built from (go build in a checkout
// stamps it; go run does not) and the Go version, so that a bug report
// can say exactly which build it is about.

func versionLine() string { return "fjord " + buildinfo.Read().String() + "\n" }

func newVersionCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the commit it was built from and the Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output == outputJSON {
				return writeJSON(cmd.OutOrStdout(), buildinfo.Read())
			}
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
	addOutputFlag(cmd, &output)
	return cmd
}
