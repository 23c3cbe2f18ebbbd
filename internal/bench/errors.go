package bench

import "errors"

// Errors the package returns, wrapped with detail.
var (
	// ErrInvalidWorkload: a workload file that does not parse, has an
	// unknown field, or a value out of range. The message names the
	// field, the value and what is allowed.
	ErrInvalidWorkload = errors.New("invalid workload")
	// ErrUnknownWorkload: a bare workload name that is not one of the
	// shipped workloads.
	ErrUnknownWorkload = errors.New("unknown workload")
	// ErrSanityCheck: the run finished but its numbers cannot be trusted
	// (records lost, duplicated or corrupted, send errors). Run returns
	// the Result alongside it, so the failure can be inspected.
	ErrSanityCheck = errors.New("sanity check failed")
)
