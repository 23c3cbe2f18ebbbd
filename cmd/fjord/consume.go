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
	"github.com/twmb/franz-go/pkg/kerr"
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
	defer cancel()
	adm := kadm.NewClient(admin)
	n, err := partitionCount(lookup, adm, topic)
	if err != nil {
		admin.Close()
		return err
	}
	parts := map[int32]kgo.Offset{}
	if cmd.Flags().Changed("partition") {
		if o.partition >= n {
			admin.Close()
			return fmt.Errorf("--partition %d: topic %s has %d partitions (0 to %d)", o.partition, topic, n, n-1)
		}
		parts[o.partition] = start
	} else {
		for p := range n {
			parts[p] = start
		}
	}
	if cmd.Flags().Changed("offset") {
		// An offset outside a partition would make the client reset to
		// wherever its policy says (franz-go: the start), printing
		// records the user did not ask for; say so instead.
		err = checkOffsetInRange(lookup, adm, topic, parts, o.offset)
	}
	admin.Close()
	if err != nil {
		return err
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
		buf    []byte
		count  int64
		warned = map[topicPartition]string{}
	)
	for o.maxMessages == 0 || count < o.maxMessages {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break // interrupted
		}
		var fatal error
		fetches.EachError(func(t string, p int32, err error) {
			switch {
			case errors.Is(err, context.Canceled):
			case errors.Is(err, kerr.UnknownTopicID):
				// The client stops fetching a partition whose topic id
				// changed and would report it on every poll.
				fatal = fmt.Errorf("topic %s was deleted or re-created while reading it (%v)", t, err)
			case warned[topicPartition{t, p}] != err.Error():
				// Each distinct error once per partition: a retriable one
				// comes back on every poll until it clears.
				warned[topicPartition{t, p}] = err.Error()
				fmt.Fprintf(cmd.ErrOrStderr(), "fjord: warning: %s-%d: %v\n", t, p, err)
			}
		})
		if fatal != nil {
			out.Flush()
			return fatal
		}
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

type topicPartition struct {
	topic     string
	partition int32
}

// checkOffsetInRange refuses an --offset outside [log start, log end] of
// any partition to be read, naming the range.
func checkOffsetInRange(ctx context.Context, adm *kadm.Client, topic string, parts map[int32]kgo.Offset, offset int64) error {
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the offsets of %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("listing the offsets of %s: %w", topic, err)
	}
	for p := range parts {
		s, _ := starts.Lookup(topic, p)
		e, _ := ends.Lookup(topic, p)
		if offset < s.Offset || offset > e.Offset {
			return fmt.Errorf("--offset %d is outside partition %s-%d (allowed: %d, its log start, to %d, its log end)",
				offset, topic, p, s.Offset, e.Offset)
		}
	}
	return nil
}
