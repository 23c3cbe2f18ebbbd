package acl

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Errors. Each wraps the Kafka error a client is answered with, so the
// protocol layer finds the code with errors.As(err, &*kerr.Error) (or
// ErrorCode) while tests and the controller can still tell the reasons
// apart with errors.Is. Validate's errors wrap these with the value that
// was refused.
//
// Kafka answers every refused creation with INVALID_REQUEST (42):
// AclApis.handleCreateAcls for the CLUSTER name and an empty name,
// AclControlManager.validateNewAcl for the enums and an empty name, and
// CreateAclsRequest's parse for UNKNOWN codes. Fjord refuses with the
// same code the bindings Kafka stores but can never match or crash on
// (principal, host, lengths, UTF-8; see Validate).
var (
	// ErrInvalidResourceType: ANY, UNKNOWN or a code Kafka does not know.
	ErrInvalidResourceType = wrapKerr("acl: invalid resource type", kerr.InvalidRequest)
	// ErrInvalidPatternType: a binding that is not LITERAL or PREFIXED.
	ErrInvalidPatternType = wrapKerr("acl: invalid pattern type", kerr.InvalidRequest)
	// ErrInvalidOperation: ANY, UNKNOWN or a code Kafka does not know.
	ErrInvalidOperation = wrapKerr("acl: invalid operation", kerr.InvalidRequest)
	// ErrInvalidPermission: not ALLOW or DENY.
	ErrInvalidPermission = wrapKerr("acl: invalid permission type", kerr.InvalidRequest)
	// ErrEmptyResourceName: Kafka's "Resource name should not be empty".
	ErrEmptyResourceName = wrapKerr("acl: empty resource name", kerr.InvalidRequest)
	// ErrInvalidClusterName: a CLUSTER pattern not named "kafka-cluster"
	// (Kafka: "The only valid name for the CLUSTER resource is
	// kafka-cluster"). This refuses LITERAL "*" on CLUSTER too.
	ErrInvalidClusterName = wrapKerr("acl: invalid name for the CLUSTER resource", kerr.InvalidRequest)
	// ErrInvalidPrincipal: not "Type:Name" with both parts non-empty.
	ErrInvalidPrincipal = wrapKerr("acl: invalid principal", kerr.InvalidRequest)
	// ErrInvalidHost: neither "*" nor an IP address literal.
	ErrInvalidHost = wrapKerr("acl: invalid host", kerr.InvalidRequest)
	// ErrTooLong: a name, principal or host longer than its Max* bound.
	ErrTooLong = wrapKerr("acl: field too long", kerr.InvalidRequest)
	// ErrNotUTF8: a name, principal or host that is not valid UTF-8.
	ErrNotUTF8 = wrapKerr("acl: field is not UTF-8", kerr.InvalidRequest)
	// ErrInvalidFilter: ValidateFilter refused a DescribeAcls or
	// DeleteAcls filter (an UNKNOWN field; AclControlManager.validateFilter
	// and the requests' parse).
	ErrInvalidFilter = wrapKerr("acl: invalid filter", kerr.InvalidRequest)
	// ErrSecurityDisabled: nothing here returns it. It is what the
	// protocol layer answers DescribeAcls, CreateAcls and DeleteAcls with
	// when the node runs without an authorizer (Kafka's AclApis:
	// SECURITY_DISABLED, 54, "No Authorizer is configured"), listed here
	// so that every ACL error has one home.
	ErrSecurityDisabled = wrapKerr("acl: no authorizer is configured", kerr.SecurityDisabled)
)

// kafkaError is a sentinel that is itself and wraps a kerr error.
type kafkaError struct {
	msg  string
	kerr *kerr.Error
}

func (e *kafkaError) Error() string { return e.msg }
func (e *kafkaError) Unwrap() error { return e.kerr }

func wrapKerr(msg string, k *kerr.Error) error { return &kafkaError{msg: msg, kerr: k} }

// ErrorCode is the Kafka error code for err: 0 for nil, the wrapped
// kerr code for this package's errors, UNKNOWN_SERVER_ERROR (-1) for
// anything else.
func ErrorCode(err error) int16 {
	if err == nil {
		return 0
	}
	var k *kerr.Error
	if errors.As(err, &k) {
		return k.Code
	}
	return kerr.UnknownServerError.Code
}

// refuse wraps a sentinel with the refused value.
func refuse(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)
}
