package poison

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
)

// View is a copy of Topic's policies and pauses as Load read them: not
// followed afterwards, and with no way to write. Its methods are the
// Store's, with the same sorting and ownership of returned slices.
type View struct {
	// s is a Store that never opened: no clients, no follower. Load
	// applies the records to it with the Store's own code (apply), so
	// a View and a Store that read the same records hold the same
	// policies and pauses, undecodable records included.
	s *Store
}

// Policies are group's policies ("" for every group's); see
// Store.Policies.
func (v *View) Policies(group string) []Policy { return v.s.Policies(group) }

// Pauses are group's paused partitions of topic; see Store.Pauses.
func (v *View) Pauses(group, topic string) []Pause { return v.s.Pauses(group, topic) }

// Undecodable is how many records Load left out (package doc, Records).
func (v *View) Undecodable() int64 { return v.s.Undecodable() }

// Load reads Topic from its start to its end as of the call, through a
// reader with cl's options (its brokers, client id and security), and
// returns what it holds; a missing Topic is an empty View. Unlike Open it
// never creates or reconfigures Topic, so a command that only shows
// policies and pauses (`fjord group describe`, against any Kafka cluster)
// leaves no topic behind, nor one made with a cluster's early
// replication factor (package doc, Limits). At most syncTimeout, within
// ctx.
func Load(ctx context.Context, cl *kgo.Client) (*View, error) {
	s := &Store{adm: kadm.NewClient(cl)}
	s.mu.policies = map[policyID]Policy{}
	s.mu.pauses = map[pauseID]Pause{}
	s.mu.progress = make(chan struct{})
	v := &View{s: s}
	ctx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()

	// Asked first, and apart: ListOffsets on a missing topic answers
	// UNKNOWN_TOPIC_OR_PARTITION, which bounds takes for a topic created
	// a moment ago and tries again until ctx ends. Asked afresh, not
	// through kadm, whose answer may come from cl's metadata cache (a
	// topic missing a moment ago would stay missing for seconds); and
	// without allow_auto_topic_creation, so not created by the asking.
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(Topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil && len(resp.Topics) != 1 {
		err = fmt.Errorf("asked for 1 topic, answered %d", len(resp.Topics))
	}
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return v, nil
	case err != nil:
		return nil, fmt.Errorf("poison: looking up %s: %w", Topic, err)
	}
	start, end, err := s.bounds(ctx)
	if err != nil {
		return nil, fmt.Errorf("poison: finding the end of %s: %w", Topic, err)
	}
	if start >= end {
		return v, nil // empty, or every record deleted (Sync's case)
	}
	rd, err := kgo.NewClient(append(cl.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{Topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.KeepControlRecords(), // counted as read, as the follower counts them
		kgo.FetchMaxBytes(maxFetchBytes),
	)...)
	if err != nil {
		return nil, fmt.Errorf("poison: %w", err)
	}
	defer rd.Close()
	for {
		s.mu.Lock()
		applied, fetchErr := s.mu.applied, s.mu.fetchErr
		s.mu.Unlock()
		if applied >= end {
			return v, nil
		}
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			if fetchErr != nil {
				return nil, fmt.Errorf("poison: %s read to offset %d, not yet %d (last fetch error: %v): %w", Topic, applied, end, fetchErr, ctx.Err())
			}
			return nil, fmt.Errorf("poison: %s read to offset %d, not yet %d: %w", Topic, applied, end, ctx.Err())
		}
		s.apply(fs)
		if fs.NumRecords() == 0 && fs.Err() != nil {
			// An error handed back at once, again and again (the
			// topic deleted under the reader), must not spin a core.
			clock.Sleep(ctx, retryBackoff)
		}
	}
}
