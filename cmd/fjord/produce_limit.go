package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/storage"
)

// How large a record `fjord produce` writes. The node refuses a batch
// over the topic's max.message.bytes; franz-go, left alone, refuses one
// over its own default (1,000,012 bytes) before it is sent, with the same
// MESSAGE_TOO_LARGE, so that a topic set to take 16 MB records could not
// be written from the CLI and the error blamed the node. The client's
// limit is therefore the topic's setting (or --max-message-bytes), and a
// record refused says which limit it broke.

const (
	// minBatchBytes and maxClientBatchBytes bound what franz-go takes as
	// its batch limit. The upper bound is its default largest request
	// (BrokerMaxWriteBytes, 100 MiB, also Fjord's socket.request.max.bytes)
	// less room for the request around one batch: a larger batch could
	// not be sent at all.
	minBatchBytes       = 512
	maxClientBatchBytes = 100<<20 - 1<<10
	// recordBatchOverhead is about what a batch of one record adds to
	// its key, value and headers: the 61-byte batch header and the
	// record's own lengths and deltas.
	recordBatchOverhead = 61 + 20
)

// recordLimit is a limit on record batches and where it comes from.
type recordLimit struct {
	bytes  int64 // 0: none (a topic's max.message.bytes=0)
	source string
}

func (l recordLimit) String() string {
	if l.bytes == 0 {
		return "no limit (" + l.source + " is 0)"
	}
	return fmt.Sprintf("the limit of %d bytes per record batch, %s", l.bytes, l.source)
}

// produceLimits is what produce checks records against.
type produceLimits struct {
	topicName string
	// topic is what the node enforces: the topic's max.message.bytes, or
	// the default a topic created by the produce would get.
	topic recordLimit
	// flag is --max-message-bytes when given: the client's limit instead
	// of topic.
	flag *recordLimit
}

// client is the limit the client enforces.
func (p produceLimits) client() recordLimit {
	if p.flag != nil {
		return *p.flag
	}
	return p.topic
}

// batchBytes is the batch limit to give franz-go, within what it takes.
func (p produceLimits) batchBytes() int32 {
	b := p.client().bytes
	if b == 0 || b > maxClientBatchBytes { // 0: no limit on the topic
		return maxClientBatchBytes
	}
	return int32(max(b, minBatchBytes))
}

// tooLarge explains MESSAGE_TOO_LARGE for a record of size bytes (key,
// value and headers): the client's limit if the record breaks it, else
// the node's.
func (p produceLimits) tooLarge(size int64) error {
	broken := p.topic
	hint := fmt.Sprintf("; raise it with fjord topic alter %s --config max.message.bytes=N", p.topicName)
	switch {
	case p.flag != nil && size+recordBatchOverhead > p.flag.bytes:
		broken, hint = *p.flag, "; give a larger --max-message-bytes"
	case size+recordBatchOverhead > maxClientBatchBytes:
		broken, hint = recordLimit{maxClientBatchBytes, "the largest batch the client sends in one 100 MiB request"}, ""
	}
	// Not kerr's own text, which says the server refused the record
	// whichever side did.
	return &messageError{err: kerr.MessageTooLarge, message: fmt.Sprintf("MESSAGE_TOO_LARGE: over %s%s", broken, hint)}
}

// lookupProduceLimits reads topic's max.message.bytes; for a topic that
// does not exist yet (the produce may create it), the broker's
// message.max.bytes, or else Fjord's default for a new topic.
func lookupProduceLimits(ctx context.Context, adm *kadm.Client, topic string) produceLimits {
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = configs.On(topic, nil); err == nil {
			err = rc.Err
		}
		if err == nil {
			for _, c := range rc.Configs {
				if c.Key == "max.message.bytes" && c.Value != nil {
					if n, perr := strconv.ParseInt(*c.Value, 10, 64); perr == nil && n >= 0 {
						return produceLimits{topicName: topic, topic: recordLimit{n, fmt.Sprintf("topic %s's max.message.bytes", topic)}}
					}
				}
			}
		}
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) {
		// Not Fjord, or an older Kafka: the limit is not known; the
		// default is the best guess, and the message says so.
		return produceLimits{topicName: topic, topic: recordLimit{defaultMaxMessageBytes(), "assumed (max.message.bytes of topic " + topic + " not readable)"}}
	}
	if meta, err := adm.BrokerMetadata(ctx); err == nil && len(meta.Brokers) > 0 {
		if rcs, err := adm.DescribeBrokerConfigs(ctx, meta.Brokers[0].NodeID); err == nil {
			for _, rc := range rcs {
				for _, c := range rc.Configs {
					if c.Key == "message.max.bytes" && c.Value != nil {
						if n, perr := strconv.ParseInt(*c.Value, 10, 64); perr == nil && n >= 0 {
							return produceLimits{topicName: topic, topic: recordLimit{n, "the broker's message.max.bytes, the default of a new topic " + topic}}
						}
					}
				}
			}
		}
	}
	return produceLimits{topicName: topic, topic: recordLimit{defaultMaxMessageBytes(), "the default max.message.bytes of a new topic " + topic}}
}

// defaultMaxMessageBytes is a new Fjord topic's max.message.bytes: the
// log's default (storage defines the config).
func defaultMaxMessageBytes() int64 {
	return int64(storage.DefaultConfig().MaxMessageBytes)
}

// readLine reads one line, without its newline, keeping at most max
// bytes: a longer line is read to its end but not kept (data is nil), and
// n says how long it was. Unlike bufio.Scanner's 64 KiB token cap, the
// limit is the record's.
func readLine(br *bufio.Reader, max int) (data []byte, n int, err error) {
	over := false
	for {
		chunk, err := br.ReadSlice('\n')
		if err == nil {
			chunk = chunk[:len(chunk)-1]
		}
		n += len(chunk)
		switch {
		case over:
		case n > max:
			over, data = true, nil
		default:
			data = append(data, chunk...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if !over && data == nil {
				data = []byte{} // an empty line is an empty value, not a null one
			}
			return data, n, err
		}
	}
}

// maxLineBytes is the longest line worth keeping: one longer makes a
// record larger than any batch the client sends.
func (p produceLimits) maxLineBytes() int {
	return min(int(p.batchBytes()), math.MaxInt32)
}

// lineQueue is how many lines read ahead of the producer may wait: 64,
// fewer when lines may be large, so that about 64 MiB at most wait.
func lineQueue(maxLineBytes int) int {
	return max(1, min(64, (64<<20)/max(maxLineBytes, 1)))
}
