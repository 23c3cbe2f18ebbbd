package kafkaserver

// Helpers for the authorization tests of every API: a Server with
// authorization on, images carrying bindings, and requests that come
// from a principal on a connection from an address.

import (
	"context"
	"net/netip"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/metadata"
)

// testACLConfig turns authorization on with User:admin a super user
// and allow.everyone.if.no.acl.found off, as on a cluster with
// authentication.
func testACLConfig() *ACLConfig {
	return &ACLConfig{Config: acl.Config{SuperUsers: []string{"User:admin"}}}
}

// withACLs is a harness option that turns authorization on
// (testACLConfig).
func withACLs() harnessOpt {
	return withConfig(func(c *Config) { c.ACL = testACLConfig() })
}

// allowBinding and denyBinding are one binding for principal ("User:x")
// from any host.
func allowBinding(rt acl.ResourceType, pt acl.PatternType, name, principal string, op acl.Operation) acl.Binding {
	return acl.Binding{
		Pattern: acl.ResourcePattern{Type: rt, Name: name, PatternType: pt},
		Entry:   acl.Entry{Principal: principal, Host: acl.WildcardHost, Operation: op, Permission: acl.PermissionAllow},
	}
}

func denyBinding(rt acl.ResourceType, pt acl.PatternType, name, principal string, op acl.Operation) acl.Binding {
	b := allowBinding(rt, pt, name, principal, op)
	b.Entry.Permission = acl.PermissionDeny
	return b
}

// withBindings returns a copy of img whose ACLs are bindings.
func withBindings(t testing.TB, img *metadata.Image, bindings ...acl.Binding) *metadata.Image {
	t.Helper()
	set, err := acl.NewSet(bindings)
	if err != nil {
		t.Fatalf("acl.NewSet: %v", err)
	}
	next := *img
	next.ACLs = set
	return &next
}

// testConnAs is a connection of principal ("User:alice") from host, for
// handler tests that call a handler directly (request.conn).
func testConnAs(t testing.TB, principal string, host string) *conn {
	t.Helper()
	typ, name, ok := acl.ParsePrincipal(principal)
	if !ok {
		t.Fatalf("bad principal %q", principal)
	}
	addr := netip.MustParseAddr(host)
	c := &conn{remote: netip.AddrPortFrom(addr, 40000).String(), host: addr, listener: &ListenerConfig{Name: DefaultListenerName}}
	c.setPrincipal(Principal{Type: typ, Name: name})
	return c
}

// callAs runs body's handler on s at version for principal connected
// from host. The request is encoded and decoded at version first, and so
// is the response, so both carry only what the version does on the wire.
func callAs[R kmsg.Response](t *testing.T, s *Server, principal, host string, body kmsg.Request, version int16) R {
	t.Helper()
	body.SetVersion(version)
	decodedReq := kmsg.RequestForKey(body.Key())
	decodedReq.SetVersion(version)
	if err := decodedReq.ReadFrom(body.AppendTo(nil)); err != nil {
		t.Fatalf("%s v%d: request does not decode: %v", kmsg.NameForKey(body.Key()), version, err)
	}
	a, ok := apis[body.Key()]
	if !ok {
		t.Fatalf("no API registered for key %d", body.Key())
	}
	req := &request{key: body.Key(), version: version, body: decodedReq, conn: testConnAs(t, principal, host)}
	resp, release, err := a.handle(context.Background(), s, req)
	if err != nil {
		t.Fatalf("%s v%d: handler error %v", kmsg.NameForKey(body.Key()), version, err)
	}
	if release != nil {
		release()
	}
	resp.SetVersion(version)
	decoded := body.ResponseKind()
	decoded.SetVersion(version)
	if err := decoded.ReadFrom(resp.AppendTo(nil)); err != nil {
		t.Fatalf("%s v%d: response does not decode: %v", kmsg.NameForKey(body.Key()), version, err)
	}
	return decoded.(R)
}
