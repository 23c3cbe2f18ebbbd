package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type consumeOptions struct {
	clientOptions
	fromBeginning bool
	offset        int64
	partition     int32
	maxMessages   int64
	format        string
}

func newConsumeCommand() *cobra.Command {
	var o consumeOptions
	cmd := &cobra.Command{
		Use:   "consume TOPIC",
		Short: "Print records of a topic",
		Long: `Print the records of TOPIC, one per --format template, from every partition
(or only --partition), starting at the end (new records only), at the start
(--from-beginning) or at --offset.

It reads the partitions directly, not as a member of a consumer group, and
commits no offsets. Without --max-messages it runs until interrupted.

--format verbs: ` + formatHelp,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			return runConsume(cmd, o, args[0])
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	addBoolFlag(f, &o.fromBeginning, "from-beginning", false, "start at the log start offset of each partition")
	f.Var(newIntFlag(&o.offset, 0, 0, math.MaxInt64, ""), "offset", "start at this offset (in each partition read)")
	f.Var(newIntFlag(&o.partition, 0, 0, math.MaxInt32, ""), "partition", "read only this partition (default: all)")
	f.Var(newIntFlag(&o.maxMessages, 0, 0, math.MaxInt64, "(0: no limit)"), "max-messages", "exit after printing this many records")
	f.StringVar(&o.format, "format", `%v\n`, "output template per record")
	return cmd
}

func runConsume(cmd *cobra.Command, o consumeOptions, topic string) error {
	format, err := parseFormat(o.format)
	if err != nil {
		return err
	}
	if o.fromBeginning && cmd.Flags().Changed("offset") {
		return errors.New("--from-beginning and --offset exclude each other: give one")
	}
	start := kgo.NewOffset().AtEnd()
	switch {
	case o.fromBeginning:
		start = kgo.NewOffset().AtStart()
	case cmd.Flags().Changed("offset"):
		start = kgo.NewOffset().At(o.offset)
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	seeds, err := o.seeds()
	if err != nil {
		return err
	}
	admin, err := o.connect(ctx)
	if err != nil {
		return err
	}
	lookup, cancel := context.WithTimeout(ctx, requestTimeout)
	n, err := partitionCount(lookup, kadm.NewClient(admin), topic)
	cancel()
	admin.Close()
	if err != nil {
		return err
	}
	parts := map[int32]kgo.Offset{}
	if cmd.Flags().Changed("partition") {
		if o.partition >= n {
			return fmt.Errorf("--partition %d: topic %s has %d partitions (0 to %d)", o.partition, topic, n, n-1)
		}
		parts[o.partition] = start
	} else {
		for p := range n {
			parts[p] = start
		}
	}

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(seeds...),
		kgo.ClientID("fjord-cli"),
		kgo.DialTimeout(reachTimeout),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
	)
	if err != nil {
		return err
	}
	defer cl.Close()

	out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
	var (
		buf   []byte
		count int64
	)
	for o.maxMessages == 0 || count < o.maxMessages {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break // interrupted
		}
		fetches.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintf(cmd.ErrOrStderr(), "fjord: warning: %s-%d: %v\n", t, p, err)
			}
		})
		iter := fetches.RecordIter()
		for !iter.Done() && (o.maxMessages == 0 || count < o.maxMessages) {
			buf = format.appendRecord(buf[:0], iter.Next())
			if _, err := out.Write(buf); err != nil {
				return err
			}
			count++
		}
		if err := out.Flush(); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "consumed %s\n", plural(count, "record"))
	return nil
}
