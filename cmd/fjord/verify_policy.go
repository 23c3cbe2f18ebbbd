package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/clock"
)

// What flush.policy=interval allows to be lost, and how a run tells it
// from a broken guarantee.
//
// Under flush.policy=ack every replica fsyncs a batch before it counts
// towards the high watermark, so an acknowledged record survives any
// crash of any number of nodes. Under interval a replica fsyncs every
// flush.ms and durability comes from replication alone: a record lives
// in the memory of every in-sync replica until then, and a fault that
// kills every replica at once (kill-all; a power cut of the whole
// cluster) may lose what none of them had fsynced. That is the policy's
// bargain, not a bug, so a run reports those losses apart, as allowed,
// and fails only on what the policy does not excuse.
//
// Which records: a replica fsyncs a batch at most lossWindow after it
// appended it (flush.ms, plus the log manager's check every
// flushCheckSlack, plus slack for the fsync itself). So a kill-all at T
// may lose the records acknowledged after T-lossWindow, and also older
// ones when a node that had copied them again (it was started again
// after a fault and caught up) had not had lossWindow since to fsync
// them: its log, shorter after the restart, can be the one the
// cluster's new leader has. Then the window begins at the run's start.
// Both end when the first node starts again: no record is acknowledged
// while every node is down.
//
// --local runs its nodes with --unsynced-writes-in-memory, so a SIGKILL
// loses their unsynced writes as a power cut would; without that the
// kernel's page cache keeps them and nothing would be lost at all.

const (
	// flushCheckSlack is how late after flush.ms a log manager may
	// fsync: it checks every 100 ms (storage's FlushCheckInterval), and
	// the fsync of a busy log takes its time. A generous bound: a window
	// too wide excuses a loss the policy did not cause, which the ack
	// policy's runs (no window) would still catch.
	flushCheckSlack = 1100 * time.Millisecond
)

// flushPolicy is the run topic's flush.policy and flush.ms as the
// cluster describes them, or empty when it does not (a broker that is
// not Fjord): then no loss is ever allowed.
type flushPolicy struct {
	Policy string `json:"flush_policy,omitempty"`
	Ms     int64  `json:"flush_ms,omitempty"`
}

// lossWindow is how far back from a kill-all records may be lost: 0 when
// the policy allows none.
func (p flushPolicy) lossWindow() time.Duration {
	if p.Policy != "interval" {
		return 0
	}
	return time.Duration(p.Ms)*time.Millisecond + flushCheckSlack
}

// describeFlushPolicy asks the cluster for topic's flush.policy and
// flush.ms. A cluster that does not know them answers without them.
func describeFlushPolicy(ctx context.Context, adm *kadm.Client, topic string) (flushPolicy, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var rc kadm.ResourceConfig
	for {
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err == nil {
			rc, err = rcs.On(topic, nil)
		}
		if err == nil {
			err = rc.Err
		}
		if err == nil {
			break
		}
		// A node that has not yet applied the topic's creation answers
		// UNKNOWN_TOPIC_OR_PARTITION for a moment.
		if !kerr.IsRetriable(err) || !clock.Sleep(ctx, 100*time.Millisecond) {
			return flushPolicy{}, fmt.Errorf("describing %s's configs: %w", topic, err)
		}
	}
	var p flushPolicy
	for _, c := range rc.Configs {
		if c.Value == nil {
			continue
		}
		switch c.Key {
		case "flush.policy":
			p.Policy = *c.Value
		case "flush.ms":
			if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil {
				p.Ms = ms
			}
		}
	}
	return p, nil
}

// topicConfigs is what the run's topic is created with: only what was
// asked for, so a broker that knows no flush.policy (not Fjord) can be
// checked too.
func (v *verifyOptions) topicConfigs() map[string]*string {
	configs := map[string]*string{}
	if v.flushPolicy != "" {
		configs["flush.policy"] = &v.flushPolicy
	}
	if v.flushMs > 0 {
		ms := strconv.FormatInt(v.flushMs, 10)
		configs["flush.ms"] = &ms
	}
	return configs
}

// mayLoseSince is where a kill-all at killed opens its window, given when
// a node was last started again and had caught up (caughtUp; zero for
// never) and the run's start.
func mayLoseSince(killed, caughtUp, runStart time.Time, window time.Duration) (from time.Time, why string) {
	if !caughtUp.IsZero() && killed.Sub(caughtUp) < window {
		return runStart, fmt.Sprintf("a node started again had caught up %.1fs before, less than flush.ms allows for its fsync, so anything it copied back could be lost",
			killed.Sub(caughtUp).Seconds())
	}
	if from := killed.Add(-window); from.After(runStart) {
		return from, fmt.Sprintf("records acknowledged in the %v before it may not have been fsynced anywhere", window)
	}
	return runStart, fmt.Sprintf("no record acknowledged since the run began had to be fsynced yet (flush.ms plus slack is %v)", window)
}
