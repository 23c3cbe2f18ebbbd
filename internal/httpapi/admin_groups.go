package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/acl"
)

// Group administration beyond listing and describing, with the
// semantics and refusals of `fjord group delete` and `fjord group
// reset-offsets` (the same requests: DeleteGroups, OffsetCommit):
//
//	DELETE /v1/groups/{group}                a group without members and its
//	                                         committed offsets
//	POST   /v1/groups/{group}/reset-offsets  move its committed offsets
//
// Both are refused (409 group_not_empty) while the group has members: a
// commit from outside the group is taken by the coordinator only then,
// and deleting a live group would pull offsets from under its members.
// An HTTP consumer instance is a member until it expires or is closed
// (DELETE /v1/topics/{topic}/consume).

// describedGroup describes group, saying whether it exists: Kafka
// answers an unknown group with GROUP_ID_NOT_FOUND (DescribeGroups v6+)
// or, before that, as a group in state Dead.
func (a *API) describedGroup(ctx context.Context, group string) (kadm.DescribedGroup, bool, error) {
	described, err := a.adm.DescribeGroups(ctx, group)
	if err != nil {
		return kadm.DescribedGroup{}, false, unavailable(err)
	}
	d := described[group]
	switch {
	case errors.Is(d.Err, kerr.GroupIDNotFound), d.Err == nil && (d.State == "Dead" || d.State == ""):
		return d, false, nil
	case errors.Is(d.Err, kerr.InvalidGroupID):
		return d, false, badRequest("bad_group", "group %q: %v", group, d.Err)
	case d.Err != nil:
		return d, false, kafkaError(d.Err)
	}
	return d, true, nil
}

func unknownGroup(group string) *apiError {
	return &apiError{status: http.StatusNotFound, code: "unknown_group", msg: fmt.Sprintf("group %q does not exist", group)}
}

// groupNotEmpty is the refusal of a change that needs a group without
// members.
func groupNotEmpty(group string, d kadm.DescribedGroup, what string) *apiError {
	return &apiError{status: http.StatusConflict, code: "group_not_empty",
		msg: fmt.Sprintf("group %q has %d members (state %s): %s only while a group has no members; stop its consumers first "+
			"(an HTTP consumer: DELETE /v1/topics/{topic}/consume?group=...&consumer=...)", group, len(d.Members), d.State, what)}
}

func (a *API) handleDeleteGroup(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	if !a.allowed(w, r, onGroup(acl.OperationDelete, group)) {
		return
	}
	_, err := a.adm.DeleteGroup(r.Context(), group)
	switch {
	case errors.Is(err, kerr.GroupIDNotFound):
		writeError(w, unknownGroup(group))
	case errors.Is(err, kerr.NonEmptyGroup):
		d, _, derr := a.describedGroup(r.Context(), group)
		if derr != nil {
			writeError(w, derr)
			return
		}
		writeError(w, groupNotEmpty(group, d, "a group can be deleted"))
	case errors.Is(err, kerr.InvalidGroupID):
		writeError(w, badRequest("bad_group", "group %q: %v", group, err))
	case err != nil:
		writeError(w, kafkaError(err))
	default:
		writeJSON(w, http.StatusOK, map[string]string{"deleted": group})
	}
}

type resetOffsetsRequest struct {
	// Topics are the topics whose offsets move, each with the
	// partitions (absent or null: all of them).
	Topics []struct {
		Topic      string  `json:"topic"`
		Partitions []int32 `json:"partitions"`
	} `json:"topics"`
	// One of To ("earliest", "latest"), Offset, Timestamp, ShiftBy.
	To        string `json:"to"`
	Offset    *int64 `json:"offset"`
	Timestamp *int64 `json:"timestamp"`
	ShiftBy   *int64 `json:"shift_by"`
	DryRun    bool   `json:"dry_run"`
}

type resetOffsetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Old is absent when the group had no committed offset there.
	Old *int64 `json:"old,omitempty"`
	New int64  `json:"new"`
	// ClampedFrom is the target asked for, when it was outside the log
	// and New is the log start or end instead (as kafka-consumer-groups
	// and `fjord group reset-offsets` do).
	ClampedFrom *int64 `json:"clamped_from,omitempty"`
}

// POST /v1/groups/{group}/reset-offsets moves the group's committed
// offsets for the partitions named: to the log start or end, an offset,
// the first record at or after a time (the log end when there is none),
// or by a shift from the committed offset. A target outside the log is
// moved to its start or end, and the answer says so (clamped_from). The
// plan is checked whole (topics, partitions, the group without members)
// before anything is committed; dry_run answers the plan alone.
func (a *API) handleResetOffsets(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	var req resetOffsetsRequest
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	targets := 0
	for _, given := range []bool{req.To != "", req.Offset != nil, req.Timestamp != nil, req.ShiftBy != nil} {
		if given {
			targets++
		}
	}
	switch {
	case len(req.Topics) == 0:
		writeError(w, badRequest("bad_topics", `topics is empty: give [{"topic": T, "partitions": [P, ...]}] (no partitions: all of them)`))
		return
	case targets != 1:
		writeError(w, badRequest("bad_reset", `give one of "to" ("earliest" or "latest"), "offset", "timestamp" or "shift_by"`))
		return
	case req.To != "" && req.To != "earliest" && req.To != "latest":
		writeError(w, badRequest("bad_reset", `to %q: want "earliest" or "latest"`, req.To))
		return
	case req.Offset != nil && *req.Offset < 0:
		writeError(w, badRequest("bad_offset", "offset %d: want 0 or more", *req.Offset))
		return
	case req.Timestamp != nil && *req.Timestamp < 0:
		writeError(w, badRequest("bad_timestamp", "timestamp %d: want Unix milliseconds, 0 or more", *req.Timestamp))
		return
	}
	// A topic named twice merges; one named without partitions means all.
	var names []string
	parts := map[string][]int32{}
	for _, t := range req.Topics {
		if t.Topic == "" {
			writeError(w, badRequest("bad_topics", "a topic without a name"))
			return
		}
		if t.Partitions != nil && len(t.Partitions) == 0 {
			writeError(w, badRequest("bad_partition", "topic %q: partitions is empty: list some, or leave it out for all of them", t.Topic))
			return
		}
		for _, p := range t.Partitions {
			if p < 0 {
				writeError(w, badRequest("bad_partition", "topic %q: partition %d: want 0 or more", t.Topic, p))
				return
			}
		}
		old, seen := parts[t.Topic]
		switch {
		case !seen:
			names = append(names, t.Topic)
			parts[t.Topic] = slices.Clone(t.Partitions)
		case old == nil || t.Partitions == nil:
			parts[t.Topic] = nil
		default:
			parts[t.Topic] = append(old, t.Partitions...)
		}
	}

	// A reset is an OffsetCommit from outside the group: READ on the
	// group and on each topic (dry_run included: it shows the plan of a
	// commit the caller must be allowed to make).
	needs := []need{onGroup(acl.OperationRead, group)}
	for _, name := range names {
		needs = append(needs, onTopic(acl.OperationRead, name))
	}
	if !a.allowed(w, r, needs...) {
		return
	}
	ctx := r.Context()
	d, exists, err := a.describedGroup(ctx, group)
	if err != nil {
		writeError(w, err)
		return
	}
	if exists && (len(d.Members) > 0 || d.State != "Empty") {
		writeError(w, groupNotEmpty(group, d, "offsets can be reset"))
		return
	}
	for _, name := range names {
		td, err := a.topicPartitions(ctx, name)
		if err != nil {
			writeError(w, err)
			return
		}
		n := int32(len(td.Partitions))
		if parts[name] == nil {
			for p := range n {
				parts[name] = append(parts[name], p)
			}
		}
		slices.Sort(parts[name])
		parts[name] = slices.Compact(parts[name])
		if last := parts[name][len(parts[name])-1]; last >= n {
			writeError(w, badRequest("bad_partition", "topic %q: partition %d does not exist; the topic has partitions 0 to %d", name, last, n-1))
			return
		}
	}
	commits, err := a.adm.FetchOffsets(ctx, group)
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	list := func(fn func(context.Context, ...string) (kadm.ListedOffsets, error)) (kadm.ListedOffsets, error) {
		l, err := fn(ctx, names...)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return nil, unavailable(err)
		}
		return l, nil
	}
	starts, err := list(a.adm.ListStartOffsets)
	if err != nil {
		writeError(w, err)
		return
	}
	ends, err := list(a.adm.ListEndOffsets)
	if err != nil {
		writeError(w, err)
		return
	}
	var byTime kadm.ListedOffsets
	if req.Timestamp != nil {
		if byTime, err = list(func(ctx context.Context, ts ...string) (kadm.ListedOffsets, error) {
			return a.adm.ListOffsetsAfterMilli(ctx, *req.Timestamp, ts...)
		}); err != nil {
			writeError(w, err)
			return
		}
	}

	plan := []resetOffsetJSON{}
	offsets := kadm.Offsets{}
	for _, name := range names {
		for _, p := range parts[name] {
			start, _ := starts.Lookup(name, p)
			end, _ := ends.Lookup(name, p)
			row := resetOffsetJSON{Topic: name, Partition: p}
			if c, ok := commits.Lookup(name, p); ok && c.Err == nil && c.At >= 0 {
				row.Old = &c.At
			}
			var target int64
			switch {
			case req.To == "earliest":
				target = start.Offset
			case req.To == "latest":
				target = end.Offset
			case req.Offset != nil:
				target = *req.Offset
			case req.Timestamp != nil:
				target = end.Offset // no record that new: where the next will be
				if o, ok := byTime.Lookup(name, p); ok && o.Offset >= 0 {
					target = o.Offset
				}
			default:
				if row.Old == nil {
					writeError(w, badRequest("bad_reset", "shift_by: group %q has no committed offset for partition %d of topic %q to shift from; use to, offset or timestamp", group, p, name))
					return
				}
				target = shiftOffset(*row.Old, *req.ShiftBy)
			}
			row.New = min(max(target, start.Offset), end.Offset)
			if row.New != target {
				row.ClampedFrom = &target
			}
			plan = append(plan, row)
			offsets.Add(kadm.Offset{Topic: name, Partition: p, At: row.New, LeaderEpoch: -1})
		}
	}
	if !req.DryRun {
		// As a consumer outside the group: no member, generation -1, no
		// leader epoch (the old one does not describe the new position).
		resp, err := a.adm.CommitOffsets(ctx, group, offsets)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			ae := commitError(err)
			if ae.code == "group_conflict" {
				ae = &apiError{status: http.StatusConflict, code: "group_not_empty",
					msg: fmt.Sprintf("group %q: a consumer joined meanwhile; stop its consumers first: %v", group, err)}
			}
			writeError(w, ae)
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"group": group, "dry_run": req.DryRun, "offsets": plan})
}

// shiftOffset adds n to offset without wrapping around; the result is
// kept within the log afterwards.
func shiftOffset(offset, n int64) int64 {
	switch {
	case n > 0 && offset > (1<<63-1)-n:
		return 1<<63 - 1
	case n < 0 && offset < (-1<<63)-n:
		return -1 << 63
	}
	return offset + n
}
