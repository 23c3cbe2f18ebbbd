package group

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// __consumer_offsets records, in Kafka's own schemas (kmsg's types; never
// encoded by hand). A key starts with its int16 version, which says what
// it is:
//
//	key v0, v1  OffsetCommitKey    group, topic, partition
//	key v2      GroupMetadataKey   group
//	key v3+     records of KIP-848 groups (not written by Fjord; skipped)
//
// Written: OffsetCommitKey v1 with OffsetCommitValue v3 (offset, leader
// epoch, metadata, commit timestamp), or v1 (offset, metadata, commit and
// expire timestamps) for a commit with a retention time; GroupMetadataKey v2 with
// GroupMetadataValue v3 (protocol type, generation, protocol, leader,
// current state timestamp, and per member: id, instance id, client id and
// host, rebalance and session timeouts, subscription, assignment). A nil
// value is a tombstone. Read: every version Kafka has written (offset
// values v0-v4, group values v0-v4).
const (
	offsetCommitKeyVersion   = 1
	offsetCommitValueVersion = 3
	// offsetCommitExpiringValueVersion is for an offset committed with
	// a retention time (OffsetCommit v2-v4): v1 carries its expiry.
	offsetCommitExpiringValueVersion = 1
	groupMetadataKeyVersion          = 2
	groupMetadataValueVersion        = 3
)

func offsetKey(group string, tp TopicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version = offsetCommitKeyVersion
	k.Group, k.Topic, k.Partition = group, tp.Topic, tp.Partition
	return k.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version = groupMetadataKeyVersion
	k.Group = group
	return k.AppendTo(nil)
}

// offsetCommitRecord is value v3, or v1 (which has no leader epoch)
// when the offset has an expiry of its own, as Kafka writes them.
func offsetCommitRecord(group string, o OffsetCommit, commitTime, expireTime time.Time) Record {
	v := kmsg.NewOffsetCommitValue()
	v.Version = offsetCommitValueVersion
	v.Offset = o.Offset
	v.LeaderEpoch = o.LeaderEpoch
	if o.Metadata != nil {
		v.Metadata = *o.Metadata
	}
	v.CommitTimestamp = commitTime.UnixMilli()
	if !expireTime.IsZero() {
		v.Version = offsetCommitExpiringValueVersion
		v.ExpireTimestamp = expireTime.UnixMilli()
	}
	return Record{Key: offsetKey(group, o.TopicPartition), Value: v.AppendTo(nil)}
}

func offsetTombstone(group string, tp TopicPartition) Record {
	return Record{Key: offsetKey(group, tp)}
}

func groupTombstone(group string) Record {
	return Record{Key: groupKey(group)}
}

// groupMetadataRecordLocked encodes the group as it is, with assignment
// (when non-nil) in place of the members' stored assignments.
// REQUIRES: g.mu held.
func groupMetadataRecordLocked(g *group, assignment map[string][]byte) Record {
	v := kmsg.NewGroupMetadataValue()
	v.Version = groupMetadataValueVersion
	v.ProtocolType = g.mu.protocolType
	v.Generation = g.mu.generation
	if g.mu.state == stateCompletingRebalance || g.mu.state == stateStable {
		p := g.mu.protocol
		v.Protocol = &p
	}
	if g.mu.leader != "" {
		l := g.mu.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = unixMilli(g.mu.stateTimestamp)
	for _, m := range g.membersLocked() {
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID = m.id
		mv.InstanceID = m.instanceID
		mv.ClientID, mv.ClientHost = m.clientID, m.clientHost
		mv.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		mv.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		mv.Subscription = m.metadataFor(g.mu.protocol)
		mv.Assignment = m.assignment
		if assignment != nil {
			mv.Assignment = assignment[m.id]
		}
		v.Members = append(v.Members, mv)
	}
	return Record{Key: groupKey(g.id), Value: v.AppendTo(nil)}
}

// unixMilli is t in Kafka's milliseconds, -1 for "none".
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return -1
	}
	return t.UnixMilli()
}

// replay accumulates a partition's records; the last record per key wins
// and a tombstone deletes.
type replay struct {
	groups map[string]*replayedGroup
}

type replayedGroup struct {
	metadata *kmsg.GroupMetadataValue // nil: none, or tombstoned
	offsets  map[TopicPartition]*offset
}

func newReplay() *replay { return &replay{groups: make(map[string]*replayedGroup)} }

func (r *replay) group(id string) *replayedGroup {
	rg := r.groups[id]
	if rg == nil {
		rg = &replayedGroup{offsets: make(map[TopicPartition]*offset)}
		r.groups[id] = rg
	}
	return rg
}

// apply replays one record. It returns an error (wrapping
// ErrMalformedRecord) for a record of a known version that does not
// decode.
func (r *replay) apply(rec Record) error {
	if len(rec.Key) < 2 {
		return fmt.Errorf("%w: key of %d bytes", ErrMalformedRecord, len(rec.Key))
	}
	tombstone := len(rec.Value) == 0
	switch version := int16(binary.BigEndian.Uint16(rec.Key)); version {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(rec.Key); err != nil {
			return fmt.Errorf("%w: offset commit key: %v", ErrMalformedRecord, err)
		}
		tp := TopicPartition{Topic: k.Topic, Partition: k.Partition}
		rg := r.group(k.Group)
		if tombstone {
			rg.offsets[tp] = nil
			return nil
		}
		o, err := decodeOffset(rec.Value)
		if err != nil {
			return fmt.Errorf("%w: offset commit value for group %q %s-%d: %v", ErrMalformedRecord, k.Group, k.Topic, k.Partition, err)
		}
		rg.offsets[tp] = o
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(rec.Key); err != nil {
			return fmt.Errorf("%w: group metadata key: %v", ErrMalformedRecord, err)
		}
		rg := r.group(k.Group)
		if tombstone {
			rg.metadata = nil
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(bytes.Clone(rec.Value)); err != nil {
			return fmt.Errorf("%w: group metadata value for group %q: %v", ErrMalformedRecord, k.Group, err)
		}
		if len(v.Members) > 0 && v.Protocol == nil {
			return fmt.Errorf("%w: group %q has %d members and no protocol", ErrMalformedRecord, k.Group, len(v.Members))
		}
		rg.metadata = &v
	default:
		// KIP-848 consumer groups, share groups, ...: records of group
		// types this coordinator does not run. Nothing Fjord writes.
	}
	return nil
}

func decodeOffset(value []byte) (*offset, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(value); err != nil {
		return nil, err
	}
	o := &offset{
		offset:      v.Offset,
		leaderEpoch: -1,
		metadata:    v.Metadata,
		commitTime:  time.UnixMilli(v.CommitTimestamp),
	}
	if v.Version >= 3 && v.LeaderEpoch >= 0 {
		o.leaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 && v.ExpireTimestamp >= 0 {
		o.expireTime = time.UnixMilli(v.ExpireTimestamp)
	}
	return o, nil
}

// build turns the replayed records into groups: one per group with
// metadata or offsets left. A group with metadata is Stable if it has
// members (Empty if not) at its recorded generation; a group with only
// offsets is a simple consumer's, Empty at generation 0.
func (r *replay) build(partition int32, now time.Time) map[string]*group {
	groups := make(map[string]*group)
	for id, rg := range r.groups {
		var offsets int
		for _, o := range rg.offsets {
			if o != nil {
				offsets++
			}
		}
		if rg.metadata == nil && offsets == 0 {
			continue
		}
		g := newGroup(id, partition, now)
		for tp, o := range rg.offsets {
			if o != nil {
				g.mu.offsets[tp] = *o
			}
		}
		if v := rg.metadata; v != nil {
			loadGroupMetadata(g, v)
		}
		groups[id] = g
	}
	return groups
}

// loadGroupMetadata sets g from its metadata record.
func loadGroupMetadata(g *group, v *kmsg.GroupMetadataValue) {
	g.mu.protocolType = v.ProtocolType
	g.mu.generation = v.Generation
	if v.Protocol != nil {
		g.mu.protocol = *v.Protocol
	}
	g.mu.stateTimestamp = time.Time{}
	if v.Version >= 2 && v.CurrentStateTimestamp >= 0 {
		g.mu.stateTimestamp = time.UnixMilli(v.CurrentStateTimestamp)
	}
	for _, mv := range v.Members {
		rebalance := mv.RebalanceTimeoutMillis
		if v.Version == 0 || rebalance < 0 {
			rebalance = mv.SessionTimeoutMillis // v0 predates KIP-62's rebalance timeout
		}
		m := &member{
			id:               mv.MemberID,
			instanceID:       cloneString(mv.InstanceID),
			clientID:         mv.ClientID,
			clientHost:       mv.ClientHost,
			protocolType:     v.ProtocolType,
			protocols:        []Protocol{{Name: g.mu.protocol, Metadata: bytes.Clone(mv.Subscription)}},
			sessionTimeout:   time.Duration(mv.SessionTimeoutMillis) * time.Millisecond,
			rebalanceTimeout: time.Duration(rebalance) * time.Millisecond,
			assignment:       bytes.Clone(mv.Assignment),
		}
		g.addMemberLocked(m)
	}
	if v.Leader != nil {
		if _, ok := g.mu.members[*v.Leader]; ok {
			g.mu.leader = *v.Leader
		}
	}
	if len(g.mu.members) > 0 {
		g.mu.state = stateStable
	} else {
		g.mu.leader = ""
	}
	g.computeSubscribedLocked()
}
