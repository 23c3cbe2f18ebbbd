package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// The peers `fjord bench peer` can run. Each lives in its own Go module
// under bench/<name> so that Fjord's module never depends on a peer's
// server; the command runs that module with `go run`, which is why it
// needs a source checkout and a Go toolchain.
var benchPeers = []string{"nats"}

// peerStopGrace is how long the peer gets to stop its server and write
// its results after an interrupt before it is killed.
const peerStopGrace = 30 * time.Second

// benchPeerOptions are the flags of `fjord bench peer`.
type benchPeerOptions struct {
	out      string
	duration time.Duration
	warmup   time.Duration
	// warmupSet: --warmup was given (0 is a value: no warmup).
	warmupSet bool
	dir       string
}

// peerRun runs `go run . args...` in dir with the output passed through.
type peerRun func(ctx context.Context, dir string, args []string, stdout, stderr io.Writer) error

func newBenchPeerCommand() *cobra.Command { return newBenchPeerCommandWith(os.Getwd, goRun) }

// newBenchPeerCommandWith takes where the search for the checkout starts
// and what runs the peer, so tests can check both without a Go build.
func newBenchPeerCommandWith(getwd func() (string, error), run peerRun) *cobra.Command {
	var o benchPeerOptions
	cmd := &cobra.Command{
		Use:   "peer PEER WORKLOAD [-- PEER-FLAGS]",
		Short: "Run a workload against a peer system (nats) for a side-by-side ratio",
		Long: `Run a bench workload against a peer system with the same message sizes,
counts and pacing as ` + "`fjord bench run`" + `, and write the same result:
<out>/<workload>-<peer>.json and .png, and the table on stdout.

Peers: nats (an embedded NATS JetStream server, file storage, R1, in its own
process so its memory and CPU are measured alone; with --replicas 3, or a
workload's replicationFactor: 3, a cluster of three such servers with streams
of three replicas, beside Fjord's --nodes 3).

A peer is its own Go module under bench/<peer> in Fjord's source tree, so the
fjord binary does not carry the peer's server: this command finds that
directory above the current one and runs it with ` + "`go run`" + `. Run it from
a Fjord source checkout with Go installed.

WORKLOAD is a shipped workload's name (e.g. max-rate-1p-1kb) or a path to a
workload .yaml file, as for ` + "`fjord bench run`" + `.

Flags after -- go to the peer unchanged. nats's:
  --replicas N                    replicas of every stream, on N servers (default: the workload's replicationFactor, else 1)
  --sync default|always|DURATION  JetStream fsync (default: every 2 minutes)
  --max-pending N                 unacknowledged publishes per producer
  --consumer pull|push            ordered consumer kind (default pull)
  --read-ahead N                  a pull consumer's read-ahead in messages

Example: fjord bench peer nats max-rate-16p-1kb-4p4c -- --replicas 3 --sync always`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			if (dash < 0 && len(args) != 2) || (dash >= 0 && dash != 2) {
				return fmt.Errorf("want PEER WORKLOAD (then, after --, the peer's own flags); got %q", args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			peer, workload := args[0], args[1]
			if !slices.Contains(benchPeers, peer) {
				return fmt.Errorf("unknown peer %q: known peers: %s", peer, strings.Join(benchPeers, ", "))
			}
			wd, err := getwd()
			if err != nil {
				return err
			}
			dir, err := findPeerModule(wd, peer)
			if err != nil {
				return err
			}
			o.warmupSet = cmd.Flags().Changed("warmup")
			peerArgs, err := o.peerArgs(wd, workload)
			if err != nil {
				return err
			}
			peerArgs = append(peerArgs, args[2:]...)
			return run(cmd.Context(), dir, peerArgs, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", ".", "directory for <workload>-<peer>.json and .png")
	f.DurationVar(&o.duration, "duration", 0, "override the workload's duration (e.g. 30s)")
	f.DurationVar(&o.warmup, "warmup", 0, "override the workload's warmup (e.g. 10s)")
	f.StringVar(&o.dir, "dir", "", "parent of the peer's data directory (default: the system temp dir); must be a disk, not tmpfs")
	return cmd
}

// peerArgs renders the peer's command line. The peer runs in its own
// directory, so every path the user gave relative to wd is made
// absolute first; a shipped workload's name is passed on as it is.
func (o benchPeerOptions) peerArgs(wd, workload string) ([]string, error) {
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(wd, p)
	}
	if looksLikePath(workload) {
		workload = abs(workload)
	}
	args := []string{workload, "--out", abs(o.out)}
	if o.duration < 0 {
		return nil, errors.New("--duration must not be negative")
	}
	if o.duration > 0 {
		args = append(args, "--duration", o.duration.String())
	}
	if o.warmup < 0 {
		return nil, errors.New("--warmup must not be negative")
	}
	if o.warmupSet {
		args = append(args, "--warmup", o.warmup.String())
	}
	if o.dir != "" {
		args = append(args, "--dir", abs(o.dir))
	}
	return args, nil
}

// looksLikePath reports whether a workload argument is a file, by the
// rule bench.LoadWorkload applies; anything else names a shipped
// workload.
func looksLikePath(s string) bool {
	return strings.ContainsRune(s, '/') || strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml")
}

// findPeerModule returns bench/<peer> in the nearest directory at or
// above start that holds bench/<peer>/go.mod.
func findPeerModule(start, peer string) (string, error) {
	dir := start
	for {
		candidate := filepath.Join(dir, "bench", peer)
		if st, err := os.Stat(filepath.Join(candidate, "go.mod")); err == nil && !st.IsDir() {
			return candidate, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("bench/%s/go.mod not found in %s or any directory above it: run from a Fjord source checkout", peer, start)
		}
		dir = up
	}
}

// goRun runs `go run . args...` in dir. An interrupt reaches the peer as
// SIGINT (not go's default SIGKILL) so it can stop its server and remove
// its data directory.
func goRun(ctx context.Context, dir string, args []string, stdout, stderr io.Writer) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the Go toolchain is needed to run a peer (it is built from %s): %w", dir, err)
	}
	c := exec.CommandContext(ctx, goBin, append([]string{"run", "."}, args...)...)
	c.Dir = dir
	c.Stdout = stdout
	c.Stderr = stderr
	c.Cancel = func() error { return c.Process.Signal(os.Interrupt) }
	c.WaitDelay = peerStopGrace
	if err := c.Run(); err != nil {
		return fmt.Errorf("peer in %s: %w", dir, err)
	}
	return nil
}
