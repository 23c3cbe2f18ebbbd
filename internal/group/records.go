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
//
// A TxnOffsetCommit writes the same offset records in a transactional
// batch of its producer, and the transaction's marker (a control record,
// no key or value) later lands on the same partition; Load's read marks
// both (Record.Transactional, Record.Control).
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
// and a tombstone deletes. Transactions (KIP-98), as Kafka's loader
// replays them:
//
//   - an offset record in a transactional batch pends for its producer,
//     and a tombstone there drops that producer's pending offset;
//   - a tombstone outside a transaction deletes the committed offset and
//     every producer's pending offset of the partition (DeleteGroups and
//     OffsetDelete tombstone pending offsets this way; retention never
//     tombstones a partition with offsets pending);
//   - a marker ends its producer's pending offsets in every group: a
//     commit makes each the committed offset of its partition unless the
//     committed one's record is later in the log, an abort drops them.
//
// Offsets pending at the end stay pending in the loaded groups: their
// marker comes later, through CompleteTxn.
type replay struct {
	groups map[string]*replayedGroup
	// producerGroups are, per producer id, the groups holding its pending
	// offsets, so a marker visits only those.
	producerGroups map[int64]map[string]struct{}
	// end is one past the largest record offset replayed: loaded groups
	// number the appends they apply from there (offset.position).
	end int64
}

type replayedGroup struct {
	metadata   *kmsg.GroupMetadataValue // nil: none, or tombstoned
	offsets    map[TopicPartition]*offset
	txnOffsets map[int64]map[TopicPartition]*offset // pending, by producer id
}

func newReplay() *replay {
	return &replay{groups: make(map[string]*replayedGroup), producerGroups: make(map[int64]map[string]struct{})}
}

func (r *replay) group(id string) *replayedGroup {
	rg := r.groups[id]
	if rg == nil {
		rg = &replayedGroup{offsets: make(map[TopicPartition]*offset), txnOffsets: make(map[int64]map[TopicPartition]*offset)}
		r.groups[id] = rg
	}
	return rg
}

// apply replays one record. It returns an error (wrapping
// ErrMalformedRecord) for a record of a known version that does not
// decode.
func (r *replay) apply(rec Record) error {
	r.end = max(r.end, rec.Offset+1)
	if rec.Control {
		r.completeTxn(rec.ProducerID, rec.Commit)
		return nil
	}
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
			if rec.Transactional {
				if pending := rg.txnOffsets[rec.ProducerID]; pending != nil {
					delete(pending, tp)
				}
				return nil
			}
			rg.offsets[tp] = nil
			for _, pending := range rg.txnOffsets {
				delete(pending, tp)
			}
			return nil
		}
		o, err := decodeOffset(rec.Value)
		if err != nil {
			return fmt.Errorf("%w: offset commit value for group %q %s-%d: %v", ErrMalformedRecord, k.Group, k.Topic, k.Partition, err)
		}
		o.position = rec.Offset
		if rec.Transactional {
			pending := rg.txnOffsets[rec.ProducerID]
			if pending == nil {
				pending = make(map[TopicPartition]*offset)
				rg.txnOffsets[rec.ProducerID] = pending
			}
			pending[tp] = o
			groups := r.producerGroups[rec.ProducerID]
			if groups == nil {
				groups = make(map[string]struct{})
				r.producerGroups[rec.ProducerID] = groups
			}
			groups[k.Group] = struct{}{}
			return nil
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

// completeTxn replays a marker of producerID: the rule of
// group.completeTxnLocked, over the replayed records.
func (r *replay) completeTxn(producerID int64, commit bool) {
	for id := range r.producerGroups[producerID] {
		rg := r.groups[id]
		pending := rg.txnOffsets[producerID]
		delete(rg.txnOffsets, producerID)
		if !commit {
			continue
		}
		for tp, o := range pending {
			if cur := rg.offsets[tp]; cur == nil || laterInLog(*o, *cur) {
				rg.offsets[tp] = o
			}
		}
	}
	delete(r.producerGroups, producerID)
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
// metadata or offsets (committed or pending) left. A group with metadata
// is Stable if it has members (Empty if not) at its recorded generation;
// a group with only offsets is a simple consumer's, Empty at generation
// 0.
func (r *replay) build(partition int32, now time.Time) map[string]*group {
	groups := make(map[string]*group)
	for id, rg := range r.groups {
		var offsets int
		for _, o := range rg.offsets {
			if o != nil {
				offsets++
			}
		}
		for pid, pending := range rg.txnOffsets {
			if len(pending) == 0 {
				delete(rg.txnOffsets, pid) // its offsets were tombstoned
			}
		}
		if rg.metadata == nil && offsets == 0 && len(rg.txnOffsets) == 0 {
			continue
		}
		g := newGroup(id, partition, now)
		g.mu.nextPosition = r.end
		for tp, o := range rg.offsets {
			if o != nil {
				g.mu.offsets[tp] = *o
			}
		}
		for pid, pending := range rg.txnOffsets {
			m := make(map[TopicPartition]offset, len(pending))
			for tp, o := range pending {
				m[tp] = *o
			}
			g.mu.txnOffsets[pid] = m
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
