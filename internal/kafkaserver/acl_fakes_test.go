package kafkaserver

// The ACL APIs' fakes and fixture: the admin fake controller keeps
// bindings in its image as the real controller does (acl.Builder,
// copy-on-write), and a Server over it with authorization on or off
// answers requests from a principal on a connection. The controller's
// own rules (the metadata version, the bound on bindings, one batch)
// are tested in internal/controller.

import (
	"context"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// CreateACLs adds the bindings acl.Validate accepts and that are not
// there yet; an existing one is success.
func (c *adminFakeController) CreateACLs(ctx context.Context, bindings []acl.Binding) ([]error, error) {
	if err := c.begin(ctx, "CreateACLs"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := make([]error, len(bindings))
	bld := c.img.ACLs.Builder()
	for i, b := range bindings {
		_, errs[i] = bld.Add(b)
	}
	c.setACLsLocked(bld.Set())
	return errs, nil
}

// DeleteACLs removes what each filter matches in the image as it was
// before the call, listing a binding under every filter that matched it.
func (c *adminFakeController) DeleteACLs(ctx context.Context, filters []acl.Filter) ([]controlplane.ACLDeletion, error) {
	if err := c.begin(ctx, "DeleteACLs"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]controlplane.ACLDeletion, len(filters))
	bld := c.img.ACLs.Builder()
	for i, f := range filters {
		if out[i].Err = acl.ValidateFilter(f); out[i].Err != nil {
			continue
		}
		out[i].Deleted = c.img.ACLs.Matching(f)
		for _, b := range out[i].Deleted {
			bld.Remove(b)
		}
	}
	c.setACLsLocked(bld.Set())
	return out, nil
}

// setACLsLocked publishes a new image with set (nil when empty).
// REQUIRES: c.mu held.
func (c *adminFakeController) setACLsLocked(set *acl.Set) {
	if set.Len() == 0 {
		set = nil
	}
	next := c.cloneImageLocked()
	next.ACLs = set
	c.img = next
}

// setBindings puts bindings straight into the image (test setup).
func (c *adminFakeController) setBindings(t *testing.T, bindings ...acl.Binding) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.img = withBindings(t, c.img, bindings...)
}

func (c *memController) CreateACLs(context.Context, []acl.Binding) ([]error, error) {
	return nil, errMemUnsupported
}

func (c *memController) DeleteACLs(context.Context, []acl.Filter) ([]controlplane.ACLDeletion, error) {
	return nil, errMemUnsupported
}

// newACLFixture is a Server over the admin fakes with authorization as
// cfg says (nil: off; testACLConfig: User:admin is a super user and
// nobody else may do anything without a binding).
func newACLFixture(t testing.TB, cfg *ACLConfig) *adminFixture {
	t.Helper()
	f := &adminFixture{
		ctrl: newAdminFakeController(),
		reps: newAdminFakeReplicas(),
		pids: &adminFakeProducerIDs{next: 1000},
	}
	f.s = New(Config{NodeID: adminTestNodeID, TopicConfigs: testConfigs, ACL: cfg}, f.ctrl, f.reps, f.pids, nil)
	t.Cleanup(func() { f.s.Close() })
	return f
}

// aclCall runs body's handler at version as principal ("User:admin")
// connected from 10.0.0.1, and returns the response as a client reads
// it: the request and the answer each encoded at version and decoded
// again, so fields the version does not carry are gone, as on the wire.
func aclCall[R kmsg.Response](t *testing.T, f *adminFixture, principal string, body kmsg.Request, version int16) R {
	t.Helper()
	body.SetVersion(version)
	sent := body.AppendTo(nil)
	got := kmsg.RequestForKey(body.Key())
	got.SetVersion(version)
	if err := got.ReadFrom(sent); err != nil {
		t.Fatalf("%s v%d: request does not decode: %v", kmsg.NameForKey(body.Key()), version, err)
	}
	a, ok := apis[body.Key()]
	if !ok || version < a.minVersion || version > a.maxVersion {
		t.Fatalf("%s v%d is not served", kmsg.NameForKey(body.Key()), version)
	}
	resp, release, err := a.handle(context.Background(), f.s, &request{key: body.Key(), version: version, body: got, conn: testConnAs(t, principal, "10.0.0.1")})
	if err != nil {
		t.Fatalf("%s v%d: handler error %v", kmsg.NameForKey(body.Key()), version, err)
	}
	if release != nil {
		release()
	}
	resp.SetVersion(version)
	wire := resp.AppendTo(nil)
	decoded := body.ResponseKind()
	decoded.SetVersion(version)
	if err := decoded.ReadFrom(wire); err != nil {
		t.Fatalf("%s v%d: response does not decode: %v", kmsg.NameForKey(body.Key()), version, err)
	}
	out, ok := decoded.(R)
	if !ok {
		t.Fatalf("%s v%d: response is %T", kmsg.NameForKey(body.Key()), version, decoded)
	}
	return out
}

// aclHandlerDirect runs body's handler without the wire round trip, for
// values the wire cannot carry at a version (a v0 pattern type).
func aclHandlerDirect(t *testing.T, f *adminFixture, principal string, body kmsg.Request, version int16) kmsg.Response {
	t.Helper()
	body.SetVersion(version)
	resp, _, err := apis[body.Key()].handle(context.Background(), f.s, &request{key: body.Key(), version: version, body: body, conn: testConnAs(t, principal, "10.0.0.1")})
	if err != nil {
		t.Fatalf("%s v%d: handler error %v", kmsg.NameForKey(body.Key()), version, err)
	}
	return resp
}

// serveACLFixture serves f on a loopback listener, its broker
// registered there, for franz-go clients.
func serveACLFixture(t *testing.T, f *adminFixture) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.ctrl.mu.Lock()
	img := f.ctrl.cloneImageLocked()
	img.Brokers[adminTestNodeID] = metadata.Broker{NodeID: adminTestNodeID, Host: "127.0.0.1", Port: int32(l.Addr().(*net.TCPAddr).Port)}
	f.ctrl.img = img
	f.ctrl.mu.Unlock()
	served := make(chan error, 1)
	go func() { served <- f.s.Serve(l) }()
	t.Cleanup(func() {
		f.s.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}
