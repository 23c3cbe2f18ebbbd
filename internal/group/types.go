package group

import "time"

// The coordinator's requests and results. They carry what the Kafka
// requests carry, without the wire: the server decodes a request with
// kmsg, fills one of these, and encodes the result for the version it
// serves. Byte slices passed in are copied where the coordinator keeps
// them; byte slices returned belong to the caller.

// Protocol is one of a joining member's supported protocols (for the
// "consumer" protocol type, an assignor name and the member's
// subscription).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup (v0+).
type JoinRequest struct {
	Group, MemberID      string  // MemberID "": a new member
	InstanceID           *string // group.instance.id (static membership, KIP-345)
	ClientID, ClientHost string
	ProtocolType         string
	Protocols            []Protocol // the client's preference order
	SessionTimeout       time.Duration
	RebalanceTimeout     time.Duration // JoinGroup v0 has none: the server passes SessionTimeout
	RequireKnownMemberID bool          // v4+: an unknown member first gets MEMBER_ID_REQUIRED with its new id (KIP-394)
	// SupportsSkipAssignment: v9+. A static leader rejoining a Stable
	// group is told it leads with SkipAssignment set (KIP-814); older
	// versions are instead told the old leader id, so the client does
	// not run an assignment the Stable group would ignore.
	SupportsSkipAssignment bool
	Reason                 string // v8+, for the log
}

// Member is one group member as the leader sees it in its JoinResult.
type Member struct {
	MemberID   string
	InstanceID *string
	Metadata   []byte // for the group's chosen protocol
}

// JoinResult answers a JoinRequest. On error only Err and MemberID are
// set (Generation is -1); MemberID is the new id with ErrMemberIDRequired.
type JoinResult struct {
	Err            error
	Generation     int32
	ProtocolType   string
	Protocol       string
	LeaderID       string
	MemberID       string
	SkipAssignment bool     // static leader rejoining a stable group (KIP-814)
	Members        []Member // only for the leader
}

// SyncRequest is a SyncGroup (v0+).
type SyncRequest struct {
	Group, MemberID        string
	InstanceID             *string
	Generation             int32
	ProtocolType, Protocol *string           // v5+: checked when non-nil (INCONSISTENT_GROUP_PROTOCOL)
	Assignments            map[string][]byte // from the leader: member id -> assignment
}

// SyncResult answers a SyncRequest.
type SyncResult struct {
	Err                    error
	ProtocolType, Protocol string
	Assignment             []byte
}

// HeartbeatRequest is a Heartbeat (v0+).
type HeartbeatRequest struct {
	Group, MemberID string
	InstanceID      *string
	Generation      int32
}

// LeaveMember is one member of a LeaveGroup: v0-2 name one member id,
// v3+ a batch in which each names a member id, or (admin removal of a
// static member) only an instance id.
type LeaveMember struct {
	MemberID   string
	InstanceID *string
	Reason     string
}

// TopicPartition names a partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// CommitRequest is an OffsetCommit for one group.
type CommitRequest struct {
	Group, MemberID string
	InstanceID      *string
	Generation      int32 // -1 with an empty member id: a simple (non-member) commit
	Offsets         []OffsetCommit
	// Retention is OffsetCommit v2-v4's retention_time_ms: when > 0,
	// these offsets expire that long after the commit, whatever the
	// group's state (Kafka's old per-offset expiry, stored as value v1).
	// 0: they expire by Config.OffsetsRetention, the v5+ rule. (Kafka
	// would expire a retention of 0 at once; no client sends one.)
	Retention time.Duration
}

// TxnCommitRequest is a TxnOffsetCommit (v0+) for one group: offsets a
// transactional producer commits inside its transaction (KIP-98). v0-2
// carry no membership: the server passes Generation -1 and no member id,
// which the coordinator accepts whatever the group's state. v3+ carry
// the consumer's (KIP-447), checked as OffsetCommit's are.
type TxnCommitRequest struct {
	Group         string
	ProducerID    int64
	ProducerEpoch int16
	Generation    int32 // -1: none
	MemberID      string
	InstanceID    *string
	// Offsets: CommitTime is ignored (TxnOffsetCommit has none; the
	// coordinator's clock at the commit is used).
	Offsets []OffsetCommit
	// Guard is the commit's transaction verification, passed to
	// Log.AppendTxn.
	Guard TxnGuard
}

// OffsetCommit is one partition of a CommitRequest.
type OffsetCommit struct {
	TopicPartition
	Offset      int64
	LeaderEpoch int32   // -1: none
	Metadata    *string // nil: stored as ""
	// CommitTime is OffsetCommit v1's commit_timestamp, which retention
	// counts from; zero: the coordinator's clock at the commit.
	CommitTime time.Time
}

// CommittedOffset is one partition of a FetchOffsets answer.
type CommittedOffset struct {
	TopicPartition
	Offset      int64 // -1: none committed
	LeaderEpoch int32 // -1: none
	Metadata    *string
	Err         error
}

// GroupDescription answers DescribeGroup. Protocol, member metadata and
// assignments are set only while the group is Stable, as in Kafka.
type GroupDescription struct {
	Group, State, ProtocolType, Protocol string
	Members                              []MemberDescription
}

// MemberDescription is one member in a GroupDescription.
type MemberDescription struct {
	MemberID             string
	InstanceID           *string
	ClientID, ClientHost string
	Metadata, Assignment []byte
}

// GroupListing is one group in a ListGroups answer.
type GroupListing struct{ Group, ProtocolType, State string }
