// Package groupview computes a consumer group's partition rows as
// kafka-consumer-groups --describe shows them, with Fjord's lag in bytes
// and seconds and its retention gaps besides, for every surface that
// describes a group (fjord group describe, GET /v1/groups/{group}), so
// the CLI and the HTTP API cannot list different partitions or lags.
package groupview

import (
	"cmp"
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/grouplag"
)

// Row is one partition of a group: every partition assigned to a member
// and every partition with a commit. Nil is "none" or "not known": no
// commit, no log end (a deleted topic), and then no lag. Lag is log end
// minus committed, not clamped.
//
// The rest comes from the partition's leader (Fjord's DescribePositions,
// internal/grouplag) for a partition with a commit, and is nil when the
// leader could not be asked: LogStart, the first offset still in the
// log; LagBytes, the bytes of log from the committed offset to the high
// watermark; LagSeconds, the age of the first record the group has yet
// to consume (0 when caught up); Lost, the records between the committed
// offset and the log start that retention removed before the group read
// them (0 when there is no gap).
type Row struct {
	Topic      string
	Partition  int32
	Committed  *int64
	LogEnd     *int64
	Lag        *int64
	Member     *string // the member assigned the partition
	LogStart   *int64
	LagBytes   *int64
	LagSeconds *float64
	Lost       *int64
}

// Rows builds d's rows from its members' consumer assignments, commits'
// offsets (entries with an error or no offset are skipped), the log end
// offsets it lists with adm, and the leaders' positions it asks through
// cl (adm's client, made with fjordmsg.ClientOpts), sorted by topic and
// partition. Its only error is ListEndOffsets', which the caller names: a
// leader that cannot say where the commits stand leaves those fields nil.
func Rows(ctx context.Context, cl *kgo.Client, adm *kadm.Client, d kadm.DescribedGroup, commits kadm.OffsetResponses) ([]*Row, error) {
	type key struct {
		topic     string
		partition int32
	}
	byKey := map[key]*Row{}
	row := func(t string, p int32) *Row {
		k := key{t, p}
		if byKey[k] == nil {
			byKey[k] = &Row{Topic: t, Partition: p}
		}
		return byKey[k]
	}
	for _, m := range d.Members {
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				for _, p := range t.Partitions {
					row(t.Topic, p).Member = &m.MemberID
				}
			}
		}
	}
	commits.Each(func(c kadm.OffsetResponse) {
		if c.Err == nil && c.At >= 0 {
			row(c.Topic, c.Partition).Committed = &c.At
		}
	})
	var topics []string
	for k := range byKey {
		if !slices.Contains(topics, k.topic) {
			topics = append(topics, k.topic)
		}
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		// A deleted topic comes back as an error for it alone; its rows
		// then have no log end.
		var err error
		if ends, err = adm.ListEndOffsets(ctx, topics...); err != nil {
			return nil, err
		}
	}
	positions := askPositions(ctx, cl, adm, topics, maps.Values(byKey))
	rows := make([]*Row, 0, len(byKey))
	for _, r := range byKey {
		if e, ok := ends.Lookup(r.Topic, r.Partition); ok && e.Err == nil {
			end := e.Offset
			r.LogEnd = &end
			if r.Committed != nil {
				lag := end - *r.Committed
				r.Lag = &lag
			}
		}
		if a := positions[grouplag.TopicPartition{Topic: r.Topic, Partition: r.Partition}]; a != nil && a.Err == nil && r.Committed != nil {
			l := grouplag.LagOf(*r.Committed, a)
			secs := float64(l.Age.Milliseconds()) / 1000
			r.LogStart, r.LagBytes, r.LagSeconds, r.Lost = &a.LogStartOffset, &l.Bytes, &secs, &l.Lost
		}
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(x, y *Row) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return rows, nil
}

// askPositions asks the leaders of the committed partitions where the
// commits stand. Leaders come from a metadata request for topics; any
// failure leaves partitions out (their rows then lack those fields).
func askPositions(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topics []string, rows iter.Seq[*Row]) map[grouplag.TopicPartition]*grouplag.Answer {
	offsets := map[grouplag.TopicPartition][]int64{}
	for r := range rows {
		if r.Committed != nil && *r.Committed >= 0 {
			offsets[grouplag.TopicPartition{Topic: r.Topic, Partition: r.Partition}] = []int64{*r.Committed}
		}
	}
	if len(offsets) == 0 {
		return nil
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil
	}
	leaderOf := func(topic string, partition int32) (int32, error) {
		t, ok := md.Topics[topic]
		if !ok || t.Err != nil {
			return -1, grouplag.ErrNoLeader
		}
		p, ok := t.Partitions[partition]
		if !ok || p.Leader < 0 {
			return -1, grouplag.ErrNoLeader
		}
		return p.Leader, nil
	}
	ask := func(ctx context.Context, node int32, req *fjordmsg.DescribePositionsRequest) (*fjordmsg.DescribePositionsResponse, error) {
		resp, err := cl.Broker(int(node)).Request(ctx, req)
		if err != nil {
			return nil, err
		}
		r, ok := resp.(*fjordmsg.DescribePositionsResponse)
		if !ok {
			return nil, fmt.Errorf("node %d answered DescribePositions with %T", node, resp)
		}
		return r, nil
	}
	return grouplag.Ask(ctx, leaderOf, ask, offsets, time.Now)
}
