package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

type produceOptions struct {
	clientOptions
	key          string
	keySeparator string
	acks         string
	partition    int32
	compression  string
	maxMessage   int64
	headers      []string
}

func newProduceCommand() *cobra.Command {
	var o produceOptions
	cmd := &cobra.Command{
		Use:   "produce TOPIC",
		Short: "Produce lines from stdin as records",
		Long: `Produce each line of stdin as one record to TOPIC.

With --key every record gets that key; with --key-separator each line is split
at the first separator into key and value (a line without it has no key).
Records with the same key go to the same partition unless --partition picks
one. A summary goes to stderr at the end; the exit status is 1 if any record
failed.

A record batch is at most the topic's max.message.bytes (for a topic the
produce creates, the node's default), or --max-message-bytes if given; a
larger record fails, saying which limit it is over.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			return runProduce(cmd, o, args[0])
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.key, "key", "", "key for every record")
	f.StringVar(&o.keySeparator, "key-separator", "", "split each line at the first occurrence into key and value")
	f.Var(newEnumFlag(&o.acks, "all", "all", "-1", "1", "0"), "acks", "acknowledgements: all (every in-sync replica, idempotent), 1 (leader), 0 (none)")
	f.Var(newIntFlag(&o.partition, 0, 0, math.MaxInt32, ""), "partition", "write every record to this partition (default: by key, or spread without one)")
	f.Var(newEnumFlag(&o.compression, "none", "none", "gzip", "snappy", "lz4", "zstd"), "compression", "batch compression")
	f.StringArrayVar(&o.headers, "header", nil, "header key=value for every record (repeatable; a key may repeat)")
	f.Var(newIntFlag(&o.maxMessage, 0, minBatchBytes, maxClientBatchBytes, ""), "max-message-bytes",
		"largest record batch the client sends (default: the topic's max.message.bytes)")
	return cmd
}

func runProduce(cmd *cobra.Command, o produceOptions, topic string) error {
	if cmd.Flags().Changed("key") && o.keySeparator != "" {
		return errors.New("--key and --key-separator exclude each other: give one")
	}
	if cmd.Flags().Changed("key-separator") && o.keySeparator == "" {
		return errors.New("--key-separator is empty: give the string between key and value, e.g. ':'")
	}
	headers, err := parseHeaders(o.headers)
	if err != nil {
		return err
	}
	opts := []kgo.Opt{
		kgo.DefaultProduceTopic(topic),
		// Ask for auto-creation in metadata requests, as Kafka's console
		// producer does; the node decides (--auto-create-topics).
		kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchCompression(map[string]kgo.CompressionCodec{
			"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
			"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
		}[o.compression]),
		// A record that cannot be delivered fails instead of being
		// retried for as long as the process lives.
		kgo.RecordDeliveryTimeout(requestTimeout),
		kgo.ProducerLinger(5 * time.Millisecond),
	}
	switch o.acks {
	case "all", "-1":
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	case "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case "0":
		opts = append(opts, kgo.RequiredAcks(kgo.NoAck()), kgo.DisableIdempotentWrite())
	}
	manual := cmd.Flags().Changed("partition")
	if manual {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The limits and the partition are looked up first: franz-go takes
	// its batch limit when the client is made.
	adm, closeAdmin, err := o.adminClient(ctx)
	if err != nil {
		return err
	}
	lookup, cancel := context.WithTimeout(ctx, requestTimeout)
	limits := lookupProduceLimits(lookup, adm, topic)
	if cmd.Flags().Changed("max-message-bytes") {
		limits.flag = &recordLimit{o.maxMessage, "--max-message-bytes"}
	}
	if manual {
		// A topic that does not exist yet may be auto-created by the
		// produce itself.
		n, err := partitionCount(lookup, adm, topic)
		if err == nil && o.partition >= n {
			cancel()
			closeAdmin()
			return fmt.Errorf("--partition %d: topic %s has %d partitions (0 to %d)", o.partition, topic, n, n-1)
		}
	}
	cancel()
	closeAdmin()
	opts = append(opts, kgo.ProducerBatchMaxBytes(limits.batchBytes()),
		// Reading stdin waits for the node once this much is in flight,
		// rather than holding every 15 MB line of a large input at once.
		kgo.MaxBufferedBytes(max(2*int(limits.batchBytes()), 64<<20)))
	cl, err := o.connect(ctx, opts...)
	if err != nil {
		return err
	}
	defer cl.Close()

	var (
		mu        sync.Mutex
		ok, fail  int
		firstErr  error
		firstLine int
		firstSize int64 // of a record too large; else -1
		wg        sync.WaitGroup
	)
	lines := readLines(ctx, cmd.InOrStdin(), limits.maxLineBytes())
	// Records already read are delivered even after an interrupt; each
	// is bounded by RecordDeliveryTimeout.
	produceCtx := context.WithoutCancel(ctx)
	lineNo := 0
read:
	for {
		var l line
		select {
		case next, more := <-lines: // the next line, or EOF
			if !more {
				break read
			}
			l = next
		case <-ctx.Done(): // SIGINT or SIGTERM: stop reading stdin
			break read
		}
		if l.err != nil {
			err = fmt.Errorf("reading stdin: %w", l.err)
			break read
		}
		lineNo++
		if l.data == nil {
			// Longer than any batch the client sends: not kept.
			fail++
			if firstErr == nil {
				firstErr, firstLine, firstSize = limits.tooLarge(int64(l.n)), lineNo, int64(l.n)
			}
			continue
		}
		r := &kgo.Record{Value: l.data, Headers: headers}
		switch {
		case cmd.Flags().Changed("key"):
			r.Key = []byte(o.key)
		case o.keySeparator != "":
			if k, v, found := bytes.Cut(l.data, []byte(o.keySeparator)); found {
				r.Key, r.Value = k, v
			}
		}
		if manual {
			r.Partition = o.partition
		}
		line := lineNo
		wg.Add(1)
		cl.Produce(produceCtx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fail++
				if firstErr == nil {
					firstErr, firstLine, firstSize = err, line, -1
					if errors.Is(err, kerr.MessageTooLarge) {
						size := int64(len(r.Key) + len(r.Value))
						for _, h := range r.Headers {
							size += int64(len(h.Key) + len(h.Value))
						}
						firstErr, firstSize = limits.tooLarge(size), size
					}
				}
				return
			}
			ok++
		})
	}
	// Flush returns when every buffered record has its answer or ctx
	// ends; either way the promises have all run once wg is done.
	flushCtx, cancel := context.WithTimeout(context.Background(), requestTimeout+reachTimeout)
	defer cancel()
	_ = cl.Flush(flushCtx)
	wg.Wait()

	summary := fmt.Sprintf("produced %s to %s", plural(int64(ok), "record"), topic)
	if fail > 0 {
		summary += fmt.Sprintf("; %d failed", fail)
	}
	if ctx.Err() != nil {
		summary += " (interrupted)"
	}
	fmt.Fprintln(cmd.ErrOrStderr(), summary)
	switch {
	case err != nil:
		return err
	case errors.Is(firstErr, kerr.InvalidTopicException):
		return fmt.Errorf("record from line %d: %w", firstLine, migratedError(ctx, kadm.NewClient(cl), topic, firstErr))
	case firstErr != nil && firstSize >= 0:
		return fmt.Errorf("record from line %d (%d bytes): %w", firstLine, firstSize, firstErr)
	case firstErr != nil:
		return fmt.Errorf("record from line %d: %w", firstLine, firstErr)
	}
	return nil
}

// parseHeaders parses repeated --header key=value flags, in order; a key
// may repeat, as Kafka allows, and the value may be empty or hold '='.
func parseHeaders(kvs []string) ([]kgo.RecordHeader, error) {
	var out []kgo.RecordHeader
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("--header %q: want key=value (e.g. trace-id=abc; an empty value is key=)", kv)
		case k == "":
			return nil, fmt.Errorf("--header %q: the key is empty; want key=value", kv)
		}
		out = append(out, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return out, nil
}

type line struct {
	data []byte // nil: longer than the limit, not kept
	n    int    // the line's length, without the newline
	err  error
}

// readLines reads r line by line (without the newline) in a goroutine, so
// an interrupt is noticed while stdin blocks. A line longer than maxBytes
// is sent without its data. The channel closes at EOF, after an error
// (sent as the last line), or when ctx ends.
func readLines(ctx context.Context, r io.Reader, maxBytes int) <-chan line {
	out := make(chan line, lineQueue(maxBytes))
	go func() {
		defer close(out)
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			b, n, err := readLine(br, maxBytes)
			var l line
			switch {
			case err == nil:
				l = line{data: b, n: n}
			case errors.Is(err, io.EOF):
				if n == 0 {
					return
				}
				l = line{data: b, n: n} // a last line without a newline
			default:
				l = line{err: err}
			}
			select {
			case out <- l:
			case <-ctx.Done(): // interrupted: stop reading
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}
