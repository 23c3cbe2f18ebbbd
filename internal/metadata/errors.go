package metadata

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors. The two validation errors are the Kafka errors a client is
// answered with (so the controller returns them unchanged); the other two
// mean a bad metadata log: a proposal the controller should never have made,
// or bytes that are not a record.
var (
	// ErrInvalidTopicName: ValidateTopicName refused the name.
	ErrInvalidTopicName = kerr.InvalidTopicException
	// ErrInvalidConfig: an unknown topic config name or a value out of
	// range (the message names the value and what is allowed).
	ErrInvalidConfig = kerr.InvalidConfig
	// ErrBadRecord: Apply refused a record that would break an invariant
	// (see records.go); the image is unchanged.
	ErrBadRecord = errors.New("metadata: record breaks an invariant")
	// ErrDecode: Decode, DecodeBatch or DecodeImage was given bytes that
	// are not a record, a batch or an image snapshot.
	ErrDecode = errors.New("metadata: cannot decode")
)
