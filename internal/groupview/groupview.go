// Package groupview computes a consumer group's partition rows as
// kafka-consumer-groups --describe shows them, for every surface that
// describes a group (fjord group describe, GET /v1/groups/{group}), so
// the CLI and the HTTP API cannot list different partitions or lags.
package groupview

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Row is one partition of a group: every partition assigned to a member
// and every partition with a commit. Nil is "none" or "not known": no
// commit, no log end (a deleted topic), and then no lag. Lag is log end
// minus committed, not clamped.
type Row struct {
	Topic     string
	Partition int32
	Committed *int64
	LogEnd    *int64
	Lag       *int64
	Member    *string // the member assigned the partition
}

// Rows builds d's rows from its members' consumer assignments, commits'
// offsets (entries with an error or no offset are skipped) and the log
// end offsets it lists with adm, sorted by topic and partition. Its only
// error is ListEndOffsets', which the caller names.
func Rows(ctx context.Context, adm *kadm.Client, d kadm.DescribedGroup, commits kadm.OffsetResponses) ([]*Row, error) {
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
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(x, y *Row) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	return rows, nil
}
