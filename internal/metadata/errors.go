package metadata

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors. The four validation errors are the Kafka errors a client is
// answered with (so the controller returns them unchanged); the other two
// mean a bad metadata log: a proposal the controller should never have made,
// or bytes that are not a record.
var (
	// ErrInvalidTopicName: ValidateTopicName refused the name.
	ErrInvalidTopicName = kerr.InvalidTopicException
	// ErrInvalidConfig: an unknown topic config name or a value out of
	// range (the message names the value and what is allowed).
	ErrInvalidConfig = kerr.InvalidConfig
	// ErrInvalidRack: ValidateRack refused a broker's rack. Kafka's
	// BrokerRegistration has no code of its own for it; INVALID_REQUEST
	// is what a malformed registration gets.
	ErrInvalidRack = kerr.InvalidRequest
	// ErrInternalTopic: a delete, partition change or client write of an
	// internal topic (internal.go). INVALID_TOPIC_EXCEPTION is Kafka's
	// answer wherever its broker refuses an internal topic (a client's
	// produce, DeleteRecords); Kafka's own broker lets DeleteTopics and
	// CreatePartitions through (only its kafka-topics tool refuses), so
	// Fjord answers those the same way as its other refusals.
	ErrInternalTopic = kerr.InvalidTopicException
	// ErrBadRecord: Apply refused a record that would break an invariant
	// (see records.go); the image is unchanged.
	ErrBadRecord = errors.New("metadata: record breaks an invariant")
	// ErrDecode: Decode, DecodeBatch or DecodeImage was given bytes that
	// are not a record, a batch or an image snapshot.
	ErrDecode = errors.New("metadata: cannot decode")
	// ErrUnknownVersion: the metadata log is at a metadata version
	// newer than this code knows (KnownMetadataVersion).
	ErrUnknownVersion = errors.New("metadata: metadata version newer than this node knows")
)
