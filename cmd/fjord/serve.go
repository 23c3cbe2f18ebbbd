package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/vfs"
)

// serveOptions are the flags of `fjord serve`; each can also be set as
// FJORD_<NAME> in the environment (flags win).
type serveOptions struct {
	dataDir  string
	logLevel string
}

func newServeCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a Fjord node",
		Long: `Run a Fjord node.

Today the node opens the partition logs in --data-dir (recovering them after
an unclean shutdown), runs their retention, flushing and compaction, and shuts
down cleanly on SIGINT or SIGTERM (a second signal exits at once). The Kafka
protocol listener is the next piece of work.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			applyEnv(cmd, "FJORD_")
			return runServe(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.dataDir, "data-dir", "./fjord-data", "directory holding the node's partition logs")
	cmd.Flags().StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

// applyEnv sets each flag not given on the command line from
// FJORD_<FLAG_NAME> (dashes as underscores), if set.
func applyEnv(cmd *cobra.Command, prefix string) {
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		name := prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			// Every serve flag is a string, so Set cannot fail; values
			// are checked, and named in errors, by runServe.
			_ = cmd.Flags().Set(f.Name, v)
		}
	})
}

func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level %q: allowed values are debug, info, warn, error", s)
	}
	return l, nil
}

func runServe(ctx context.Context, o serveOptions) error {
	level, err := parseLogLevel(o.logLevel)
	if err != nil {
		return err
	}
	if strings.TrimSpace(o.dataDir) == "" {
		return fmt.Errorf("--data-dir is empty: give a directory path")
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	logs, err := storage.OpenManager(vfs.OS(), o.dataDir, storage.DefaultConfig(), storage.ManagerOptions{Logger: logger})
	if err != nil {
		return fmt.Errorf("opening data directory %s: %w", o.dataDir, err)
	}
	logger.Info("fjord node started", "data_dir", o.dataDir, "logs", len(logs.Logs()), "clean_start", logs.CleanStart)

	<-ctx.Done()
	stop() // a second signal now kills the process at once
	logger.Info("shutting down")
	if err := logs.Close(); err != nil {
		return fmt.Errorf("closing logs: %w", err)
	}
	return nil
}
