package kafkaserver

import (
	"fmt"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/acl"
)

// aclAPIs: the ACL administration APIs (issue 20, slice 3), v0-3 as
// Kafka 3.x and 4.x serve them (shared/KAFKA-API.md; v2 made them
// flexible, v3 changed nothing on the wire but the KRaft semantics).
// Each handler lives in its own file. The bindings live in the metadata
// log: DescribeAcls answers from this node's image, CreateAcls and
// DeleteAcls go to the active controller.
//
// The three share an order, Kafka's (AclApis): no authorizer configured
// is SECURITY_DISABLED for every entry; then CLUSTER DESCRIBE (Describe)
// or CLUSTER ALTER (Create, Delete), denied with
// CLUSTER_AUTHORIZATION_FAILED for every entry; then the request's shape
// (the bound on its entries, the version-0 pattern rule, unknown enum
// codes: INVALID_REQUEST), entry by entry where the response has entries.
var aclAPIs = []api{
	{key: 29, minVersion: 0, maxVersion: 3, handle: handleDescribeACLs},
	{key: 30, minVersion: 0, maxVersion: 3, handle: handleCreateACLs, controlChange: true},
	{key: 31, minVersion: 0, maxVersion: 3, handle: handleDeleteACLs, controlChange: true},
}

// maxACLMessageBytes bounds the message of one entry's error: acl's
// refusals quote the value refused (a resource name of up to
// acl.MaxNameBytes, escaped), and a thousand entries each quoting four
// kilobytes would make an answer several times its request.
const maxACLMessageBytes = 256

// aclRefusal is the answer to a request refused before any entry is
// looked at (no authorizer, not authorized, too many entries), for each
// of its n entries: err's code for all, its message on each entry of a
// request within limit entries, on the first only of a larger one, so
// that a request of a million tiny entries is not answered with a
// million copies of a sentence.
type aclRefusal struct {
	code  int16
	msg   *string
	n     int
	limit int
}

func (s *Server) refuseACLRequest(err error, where string, n, limit int) aclRefusal {
	code, msg := s.aclErrorAndMessage(err, where)
	return aclRefusal{code: code, msg: msg, n: n, limit: limit}
}

// entry is the code and message of entry i.
func (r aclRefusal) entry(i int) (int16, *string) {
	if i > 0 && r.n > r.limit {
		return r.code, nil
	}
	return r.code, r.msg
}

// aclRequestError is the refusal of a whole CreateAcls or DeleteAcls
// before its entries are looked at, nil when it may go on: no
// authorizer, or op on the cluster denied.
func (s *Server) aclRequestError(req *request, op acl.Operation) error {
	if s.cfg.ACL == nil {
		// Kafka's AclApis answers so without an authorizer.
		return fmt.Errorf("%w: authorization is off on this node: it turns on once a listener authenticates clients, or with --super-users or --allow-everyone-if-no-acl-found", acl.ErrSecurityDisabled)
	}
	if !s.allowedCluster(req, op) {
		return fmt.Errorf("%w: %s on the cluster is denied to %s", authzError(acl.ResourceCluster), op, shortName(req.principal()))
	}
	return nil
}

// aclErrorAndMessage is errorAndMessage with the message cut to
// maxACLMessageBytes, on a UTF-8 boundary.
func (s *Server) aclErrorAndMessage(err error, where string) (int16, *string) {
	code, msg := s.errorAndMessage(err, where)
	if msg != nil && len(*msg) > maxACLMessageBytes {
		cut := maxACLMessageBytes
		for cut > 0 && !utf8.RuneStart((*msg)[cut]) {
			cut--
		}
		short := (*msg)[:cut] + "..."
		msg = &short
	}
	return code, msg
}

// checkVersion0Pattern applies the version-0 rule of DescribeAcls and
// DeleteAcls filters (DescribeAclsRequest and DeleteAclsRequest's
// normalizeAndValidate): version 0 knows no pattern types, so ANY is
// read as LITERAL, and anything but LITERAL is UNSUPPORTED_VERSION. It
// comes before acl.ValidateFilter. (kmsg decodes a v0 request with the
// field's default, LITERAL; the rule holds for what else calls a
// handler.)
func checkVersion0Pattern(version int16, pt acl.PatternType) (acl.PatternType, error) {
	if version > 0 {
		return pt, nil
	}
	switch pt {
	case acl.PatternAny, acl.PatternLiteral:
		return acl.PatternLiteral, nil
	}
	return pt, fmt.Errorf("%w: version 0 only supports LITERAL resource patterns, not %s", kerr.UnsupportedVersion, pt)
}
