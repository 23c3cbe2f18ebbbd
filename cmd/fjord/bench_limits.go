package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fjordmq/fjord/internal/bench/limits"
)

// limitsDirEnv names the bench directory when --dir is not given; it is
// shared by every `fjord bench` command that writes to a disk.
const limitsDirEnv = "FJORD_BENCH_DIR"

// newBenchLimitsCommand is `fjord bench limits`, a subcommand of the
// `fjord bench` group.
func newBenchLimitsCommand() *cobra.Command {
	cfg := limits.DefaultConfig()
	var runs int32
	var out string
	cmd := &cobra.Command{
		Use:   "limits",
		Short: "Measure this machine's disk, page-cache, loopback TCP and bare-ingest limits",
		Long: `Measure the reference figures that Fjord's benchmark results are quoted
against, with Go code in this process, on this machine, in this sitting:

  disk write      sequential 1 MiB writes of random bytes with fdatasync:
                  once at the end, and once per MiB
  page-cache read sequential 1 MiB reads of the file just written, cached
  loopback TCP    1 MiB writes over 127.0.0.1, measured at the receiver
  bare ingest     1 KiB-record batches (1 MiB) read from a loopback socket
                  into a reused buffer, CRC32C-checked and appended to a
                  file with one write each: to the page cache only, and
                  with an fdatasync per MiB

The bare ingest loop is the ceiling a Go broker can approach here: it does
the work a produce request cannot avoid and nothing else.

Each measurement runs --runs times, interleaved, and the median is the
figure to quote (MB/s = 10^6 bytes per second). The table goes to stdout,
progress to stderr, and everything, with the machine's description, to
--out as JSON.

The disk files go to --dir (default $FJORD_BENCH_DIR, else ./bench-data),
which must be on a disk, not tmpfs or ramfs; they are removed after each
run. Sizes take a unit: 1GiB, 512MiB, 64KiB (or KB, MB, GB), or bytes.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("dir") {
				if d := os.Getenv(limitsDirEnv); d != "" {
					cfg.Dir = d
				}
			}
			cfg.Runs = int(runs)
			if err := cfg.Validate(); err != nil {
				return err
			}
			cfg.Progress = cmd.ErrOrStderr()
			// Interrupting stops the current run between blocks, so its
			// file is removed rather than left in --dir.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := limits.Run(ctx, cfg)
			if err != nil {
				return fmt.Errorf("bench limits: %w", err)
			}
			res.WriteTable(cmd.OutOrStdout())
			if out != "" {
				if err := res.WriteJSON(out); err != nil {
					return fmt.Errorf("bench limits: writing results: %w", err)
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "limits: results written to %s\n", out)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.Dir, "dir", cfg.Dir, "directory for the disk files, on the disk to measure (default $"+limitsDirEnv+", else ./bench-data)")
	fs.StringVar(&out, "out", "bench-results/limits.json", `JSON results file ("" writes none)`)
	fs.Var(newIntFlag(&runs, 3, 1, 100, ""), "runs", "times each measurement runs; the median is reported")
	for _, f := range []struct {
		p           *int64
		name, usage string
	}{
		{&cfg.BlockBytes, "block-size", "size of each disk write, read and TCP write"},
		{&cfg.WriteBytes, "write-size", "file written by each disk-write run (both variants)"},
		{&cfg.ReadBytes, "read-size", "bytes read by each page-cache run"},
		{&cfg.TCPBytes, "tcp-size", "bytes sent by each loopback TCP run"},
		{&cfg.IngestBytes, "ingest-size", "batch bytes sent by each bare-ingest run"},
	} {
		fs.Var(&limitsSizeFlag{f.p}, f.name, f.usage)
	}
	fs.Var(&limitsIntSizeFlag{&cfg.RecordBytes}, "record-size", "record size in the bare-ingest batches")
	fs.Var(&limitsIntSizeFlag{&cfg.BatchBytes}, "batch-size", "batch size in the bare ingest (filled with whole records)")
	return cmd
}

// limitsSizeFlag is a positive byte count with an optional unit.
type limitsSizeFlag struct{ p *int64 }

func (f *limitsSizeFlag) String() string { return limits.FormatSize(*f.p) }
func (f *limitsSizeFlag) Type() string   { return "size" }

func (f *limitsSizeFlag) Set(s string) error {
	v, err := limits.ParseSize(s)
	if err != nil {
		return err
	}
	*f.p = v
	return nil
}

// limitsIntSizeFlag is a limitsSizeFlag for sizes held in an int, at
// most 1 GiB (a record or batch larger than that is not a benchmark).
type limitsIntSizeFlag struct{ p *int }

func (f *limitsIntSizeFlag) String() string { return limits.FormatSize(int64(*f.p)) }
func (f *limitsIntSizeFlag) Type() string   { return "size" }

func (f *limitsIntSizeFlag) Set(s string) error {
	v, err := limits.ParseSize(s)
	if err != nil {
		return err
	}
	if v > limits.GiB {
		return fmt.Errorf("size %q: allowed up to 1 GiB", s)
	}
	*f.p = int(v)
	return nil
}
