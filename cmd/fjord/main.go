// Command fjord is Fjord's single binary: the node and its tools.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns the exit status. Every
// error is one line on stderr, prefixed "fjord: ".
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "fjord:", err)
		return 1
	}
	return 0
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "fjord",
		Short:         "Fjord: a Kafka-compatible distributed commit log",
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version; the template prints versionLine as it is.
		Version: versionLine(),
	}
	root.SetVersionTemplate("{{.Version}}")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(
		newServeCommand(),
		newDevCommand(),
		newTopicCommand(),
		newProduceCommand(),
		newConsumeCommand(),
		newGroupCommand(),
		newDLQCommand(),
		newTxnCommand(),
		newClusterCommand(),
		newQuotaCommand(),
		newUserCommand(),
		newACLCommand(),
		newVerifyCommand(),
		newVersionCommand(),
		newBenchCommand(newBenchLimitsCommand(), newBenchPeerCommand(), newBenchReportCommand()),
	)
	return root
}
