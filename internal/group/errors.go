package group

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Expected conditions. Every error a request method returns is one of the
// kerr values below, never wrapped, so the protocol edge answers it with
// its .Code; the comment says when each is returned. The exception is a
// failed append's error that Kafka passes through (see Log): it is
// answered as the log gave it, also a kerr value, such as
// INVALID_PRODUCER_EPOCH or PRODUCER_FENCED for CommitTxnOffsets. The
// last block holds the errors of Load, which no client sees.
var (
	// ErrInvalidGroupID: an empty group id where Kafka requires one
	// (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetDelete,
	// TxnOffsetCommit; OffsetCommit, fetches, describes and deletes
	// accept "" for compatibility, as Kafka does).
	ErrInvalidGroupID = kerr.InvalidGroupID
	// ErrNotCoordinator: the group's __consumer_offsets partition is not
	// loaded on this node (never loaded, unloaded, or its load failed),
	// or an append found this node no longer leads it.
	ErrNotCoordinator = kerr.NotCoordinator
	// ErrCoordinatorLoadInProgress: the partition is being loaded.
	// SyncGroup answers ErrRebalanceInProgress instead and Heartbeat
	// answers nil, as Kafka does, because older clients do not expect it
	// there.
	ErrCoordinatorLoadInProgress = kerr.CoordinatorLoadInProgress
	// ErrCoordinatorNotAvailable: the coordinator is closed, the group was
	// removed while the request waited for it (deleted, expired), or an
	// append failed for lack of replicas.
	ErrCoordinatorNotAvailable = kerr.CoordinatorNotAvailable
	// ErrInvalidSessionTimeout: a JoinGroup session timeout outside
	// [MinSessionTimeout, MaxSessionTimeout].
	ErrInvalidSessionTimeout = kerr.InvalidSessionTimeout
	// ErrUnknownMemberID: the member id is not in the group (or the group
	// does not exist), or a static instance id is not registered.
	ErrUnknownMemberID = kerr.UnknownMemberID
	// ErrMemberIDRequired: a new dynamic member asked for KIP-394's
	// handshake; JoinResult.MemberID carries the id to rejoin with.
	ErrMemberIDRequired = kerr.MemberIDRequired
	// ErrFencedInstanceID: a static member's instance id is now held by
	// another member id (KIP-345): the caller is a stale duplicate.
	ErrFencedInstanceID = kerr.FencedInstanceID
	// ErrIllegalGeneration: the request's generation is not the group's.
	ErrIllegalGeneration = kerr.IllegalGeneration
	// ErrRebalanceInProgress: the group is rebalancing; the member must
	// rejoin.
	ErrRebalanceInProgress = kerr.RebalanceInProgress
	// ErrInconsistentGroupProtocol: a protocol type that is not the
	// group's, no protocol common to every member, an empty protocol type
	// or list from a group's first member, or a SyncGroup protocol that
	// is not the group's.
	ErrInconsistentGroupProtocol = kerr.InconsistentGroupProtocol
	// ErrGroupMaxSizeReached: the group already has MaxGroupSize members.
	ErrGroupMaxSizeReached = kerr.GroupMaxSizeReached
	// ErrOffsetMetadataTooLarge: a commit's metadata is longer than
	// MaxMetadataBytes (that partition only; nothing is stored for it).
	ErrOffsetMetadataTooLarge = kerr.OffsetMetadataTooLarge
	// ErrNonEmptyGroup: DeleteGroups (or DeleteOffsets of a group whose
	// protocol is not "consumer") while the group has members.
	ErrNonEmptyGroup = kerr.NonEmptyGroup
	// ErrGroupIDNotFound: DeleteGroups or DeleteOffsets of a group this
	// coordinator does not have.
	ErrGroupIDNotFound = kerr.GroupIDNotFound
	// ErrGroupSubscribedToTopic: DeleteOffsets of a topic a current
	// member of a consumer group subscribes to (KIP-496).
	ErrGroupSubscribedToTopic = kerr.GroupSubscribedToTopic
	// ErrRequestTimedOut: a commit's append did not finish within
	// CommitTimeout, or the request's context ended while it waited.
	ErrRequestTimedOut = kerr.RequestTimedOut
	// ErrInvalidCommitOffsetSize: a commit's records were too large for
	// the offsets topic.
	ErrInvalidCommitOffsetSize = kerr.InvalidCommitOffsetSize
	// ErrUnknownServerError: a group metadata record was too large for
	// the offsets topic (Kafka's answer too).
	ErrUnknownServerError = kerr.UnknownServerError
	// ErrUnstableOffsetCommit: a requireStable FetchOffsets of a
	// partition with a transactional commit pending (KIP-447), in that
	// partition's CommittedOffset.Err; the consumer retries until the
	// transaction ends.
	ErrUnstableOffsetCommit = kerr.UnstableOffsetCommit

	// ErrLoadSuperseded: Load's partition was unloaded, loaded again or
	// the coordinator closed before the replay finished; what was
	// replayed is dropped.
	ErrLoadSuperseded = errors.New("group: partition unloaded while it was loading")
	// ErrMalformedRecord: a __consumer_offsets record of a version this
	// coordinator reads did not decode. Load fails with it (wrapped with
	// the key) rather than serve state rebuilt around a hole.
	ErrMalformedRecord = errors.New("group: malformed __consumer_offsets record")
	// ErrClosed: Load on a closed coordinator.
	ErrClosed = errors.New("group: coordinator closed")
)
