package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxTroubled bounds the partitions cluster describe names one by one:
// a broker down leaves thousands under-replicated, and the counts say
// that already.
const maxTroubled = 20

// partitionHealth is cluster describe's partitions: how many, how many
// in each kind of trouble (the words of topic describe's STATUS), the
// reassignments in progress, and the first troubled ones.
type partitionHealth struct {
	Partitions      int `json:"partitions"`
	Offline         int `json:"offline"`
	UnderMinISR     int `json:"under_min_isr"`
	UnderReplicated int `json:"under_replicated"`
	Reassignments   int `json:"reassignments_in_progress"`
	// Troubled are the first maxTroubled partitions that are offline,
	// under min ISR or under-replicated, worst first.
	Troubled []troubledPartition `json:"troubled"`
	// troubled counts them all.
	troubled int
}

type troubledPartition struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Leader    int32    `json:"leader"`
	Replicas  []int32  `json:"replicas"`
	ISR       []int32  `json:"isr"`
	Status    []string `json:"status"`
}

// describePartitionHealth reads every topic's partitions (a Metadata
// request of its own), the min.insync.replicas of the topics with a
// partition short of in-sync replicas, and the reassignments in
// progress.
func describePartitionHealth(ctx context.Context, cl *kgo.Client) (partitionHealth, error) {
	h := partitionHealth{Troubled: []troubledPartition{}}
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		return h, fmt.Errorf("reading the partitions: %w", err)
	}
	var short []string // topics with a partition short of in-sync replicas
	for _, t := range resp.Topics {
		if kerr.ErrorForCode(t.ErrorCode) != nil || t.Topic == nil {
			continue
		}
		for _, p := range t.Partitions {
			if len(p.ISR) < len(p.Replicas) && !slices.Contains(short, *t.Topic) {
				short = append(short, *t.Topic)
			}
		}
	}
	minISR := map[string]int{}
	if len(short) > 0 {
		configs, err := kadm.NewClient(cl).DescribeTopicConfigs(ctx, short...)
		if err != nil {
			return h, fmt.Errorf("reading min.insync.replicas: %w", err)
		}
		for _, rc := range configs {
			for _, c := range rc.Configs {
				if c.Key == "min.insync.replicas" && c.Value != nil {
					minISR[rc.Name], _ = strconv.Atoi(*c.Value)
				}
			}
		}
	}
	for _, t := range resp.Topics {
		if kerr.ErrorForCode(t.ErrorCode) != nil || t.Topic == nil {
			continue
		}
		for _, p := range t.Partitions {
			h.Partitions++
			status := partitionStatus(p.Leader, p.Replicas, p.ISR, p.OfflineReplicas, minISR[*t.Topic])
			trouble := false
			for _, st := range status {
				switch st {
				case "offline":
					h.Offline++
				case "under-min-isr":
					h.UnderMinISR++
				case "under-replicated":
					h.UnderReplicated++
				default:
					continue
				}
				trouble = true
			}
			if trouble {
				h.troubled++
				h.Troubled = append(h.Troubled, troubledPartition{Topic: *t.Topic, Partition: p.Partition, Leader: p.Leader,
					Replicas: nonNil(p.Replicas), ISR: nonNil(p.ISR), Status: status})
			}
		}
	}
	slices.SortStableFunc(h.Troubled, func(a, b troubledPartition) int { return severity(a) - severity(b) })
	h.Troubled = h.Troubled[:min(len(h.Troubled), maxTroubled)]
	_, inProgress, err := listOngoing(ctx, cl, nil)
	if err != nil {
		return h, err
	}
	h.Reassignments = len(inProgress)
	return h, nil
}

// severity orders troubled partitions: offline, then under min ISR,
// then under-replicated.
func severity(p troubledPartition) int {
	switch {
	case slices.Contains(p.Status, "offline"):
		return 0
	case slices.Contains(p.Status, "under-min-isr"):
		return 1
	}
	return 2
}

func (h partitionHealth) printText(out io.Writer) error {
	fmt.Fprintf(out, "Partitions: %d; offline %d, under min ISR %d, under-replicated %d; reassignments in progress %d\n",
		h.Partitions, h.Offline, h.UnderMinISR, h.UnderReplicated, h.Reassignments)
	if len(h.Troubled) == 0 {
		return nil
	}
	more := ""
	if h.troubled > len(h.Troubled) {
		more = fmt.Sprintf(" (the first %d; fjord topic describe shows each topic's)", len(h.Troubled))
	}
	fmt.Fprintf(out, "Partitions in trouble%s:\n", more)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tLEADER\tREPLICAS\tISR\tSTATUS")
	for _, p := range h.Troubled {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\n", p.Topic, p.Partition, p.Leader, ids(p.Replicas), orNone(ids(p.ISR)), strings.Join(p.Status, ","))
	}
	return w.Flush()
}
