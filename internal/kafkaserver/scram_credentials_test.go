package kafkaserver

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// AlterScramCredentials applies what the handler let through, one
// result per user: a user named twice is DUPLICATE_RESOURCE, a deletion
// of what is not there RESOURCE_NOT_FOUND. It derives no keys (the
// salted password stands in for both): the real rules and derivation
// are the controller's planScramCredentials, tested there.
func (c *adminFakeController) AlterScramCredentials(ctx context.Context, ups []controlplane.ScramUpsertion, dels []controlplane.ScramDeletion) ([]controlplane.ScramResult, error) {
	if err := c.begin(ctx, "AlterScramCredentials"); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var order []string
	named := map[string]int{}
	for _, d := range dels {
		if named[d.User]++; named[d.User] == 1 {
			order = append(order, d.User)
		}
	}
	for _, u := range ups {
		if named[u.User]++; named[u.User] == 1 {
			order = append(order, u.User)
		}
	}
	next := c.cloneImageLocked()
	creds := map[string]map[string]metadata.ScramCredential{}
	for user, m := range c.img.ScramCredentials {
		creds[user] = maps.Clone(m)
	}
	errs := map[string]error{}
	for _, d := range dels {
		m, _ := metadata.ScramMechanismName(d.Mechanism)
		switch _, ok := creds[d.User][m]; {
		case named[d.User] > 1:
		case !ok:
			errs[d.User] = kerr.ResourceNotFound
		default:
			delete(creds[d.User], m)
			if len(creds[d.User]) == 0 {
				delete(creds, d.User)
			}
		}
	}
	for _, u := range ups {
		if named[u.User] > 1 {
			continue
		}
		m, _ := metadata.ScramMechanismName(u.Mechanism)
		if creds[u.User] == nil {
			creds[u.User] = map[string]metadata.ScramCredential{}
		}
		creds[u.User][m] = metadata.ScramCredential{Mechanism: m, Salt: u.Salt, StoredKey: u.SaltedPassword, ServerKey: u.SaltedPassword, Iterations: u.Iterations}
	}
	next.ScramCredentials = creds
	if len(creds) == 0 {
		next.ScramCredentials = nil
	}
	c.img = next
	var results []controlplane.ScramResult
	for _, user := range order {
		if named[user] > 1 {
			errs[user] = kerr.DuplicateResource
		}
		results = append(results, controlplane.ScramResult{User: user, Err: errs[user]})
	}
	return results, nil
}

func (c *memController) AlterScramCredentials(context.Context, []controlplane.ScramUpsertion, []controlplane.ScramDeletion) ([]controlplane.ScramResult, error) {
	return nil, errMemUnsupported
}

// scramUp is a good upsertion: SCRAM-SHA-512 (2), 8192 iterations, a
// salt that shows up if a response ever carries it.
func scramUp(user string, change ...func(*kmsg.AlterUserSCRAMCredentialsRequestUpsertion)) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, 2, 8192
	u.Salt, u.SaltedPassword = []byte("SECRET-SALT-"+user), bytes.Repeat([]byte{'K'}, 64)
	for _, c := range change {
		c(&u)
	}
	return u
}

func scramDel(user string, mechanism int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mechanism
	return d
}

func alterScram(t *testing.T, f *adminFixture, dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion, ups ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) *kmsg.AlterUserSCRAMCredentialsResponse {
	t.Helper()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions, req.Upsertions = dels, ups
	return adminCall[*kmsg.AlterUserSCRAMCredentialsResponse](t, f, req, 0)
}

func describeScram(t *testing.T, f *adminFixture, users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range users {
		ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		ru.Name = u
		req.Users = append(req.Users, ru)
	}
	return adminCall[*kmsg.DescribeUserSCRAMCredentialsResponse](t, f, req, 0)
}

// scramWant is one user's expected result: a code (nil: none) and words
// its message must have.
type scramWant struct {
	user string
	code *kerr.Error
	msg  string
}

func checkScramResults(t *testing.T, got []kmsg.AlterUserSCRAMCredentialsResponseResult, want []scramWant) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i, w := range want {
		r := got[i]
		if r.User != w.user {
			t.Fatalf("result %d is for %.20q, want %.20q", i, r.User, w.user)
		}
		adminWantCode(t, w.user, r.ErrorCode, w.code)
		if w.code != nil && (r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, w.msg)) {
			t.Errorf("%.20q: message %s, want %q", w.user, adminMsg(r.ErrorMessage), w.msg)
		}
	}
}

// Reference: KIP-554. AlterUserScramCredentials answers each user once,
// in the order first named; the rules that need no image refuse a user
// here, its entries never reaching the controller, with Kafka's codes;
// the users left go to the controller, which finds the rest.
// DescribeUserScramCredentials answers mechanisms and iterations from
// the image, and never a salt or a key.
func TestAlterAndDescribeUserScramCredentials(t *testing.T) {
	f := newAdminFixture(t)
	hugeName := strings.Repeat("n", 100_000)
	resp := alterScram(t, f,
		[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDel("nobody", 1), scramDel("zed", 0)},
		scramUp("alice"),
		scramUp("bob", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) {
			u.Mechanism, u.Iterations, u.SaltedPassword = 1, 4096, make([]byte, 32)
		}),
		scramUp(""),
		scramUp("frank", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.Mechanism = 3 }),
		scramUp("gina", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.Iterations = 4095 }),
		scramUp("gina2", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.Iterations = 16385 }),
		scramUp("hank", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.SaltedPassword = u.SaltedPassword[:32] }),
		scramUp("ivan", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.Salt = make([]byte, 1<<20) }),
		scramUp("ivan2", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.Salt = nil }),
		scramUp(hugeName),
		// Both good: the controller's to refuse, as named twice.
		scramUp("dave"), scramUp("dave"),
		// A bad first entry: its refusal stands.
		scramUp("erin", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.Iterations = 1 }), scramUp("erin"),
		// A bad second entry: named twice, and nothing of it is sent.
		scramUp("kate"), scramUp("kate", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.Mechanism = 7 }),
	)
	checkScramResults(t, resp.Results, []scramWant{
		{"nobody", kerr.ResourceNotFound, ""},
		{"zed", kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism 0"},
		{"alice", nil, ""},
		{"bob", nil, ""},
		{"", kerr.UnacceptableCredential, "the user name is empty"},
		{"frank", kerr.UnsupportedSaslMechanism, "unknown SCRAM mechanism 3"},
		{"gina", kerr.UnacceptableCredential, "too few iterations: 4095"},
		{"gina2", kerr.UnacceptableCredential, "too many iterations: 16385"},
		{"hank", kerr.UnacceptableCredential, "a salted password of 32 bytes (SCRAM-SHA-512 needs 64)"},
		{"ivan", kerr.UnacceptableCredential, "a salt of 1048576 bytes (at most 256)"},
		{"ivan2", kerr.UnacceptableCredential, "the salt is empty"},
		{hugeName, kerr.UnacceptableCredential, "a user name of 100000 bytes (at most 1024)"},
		{"dave", kerr.DuplicateResource, ""},
		{"erin", kerr.UnacceptableCredential, "too few iterations: 1"},
		{"kate", kerr.DuplicateResource, "cannot be altered twice"},
	})
	for _, r := range resp.Results {
		if r.ErrorMessage != nil && strings.Contains(*r.ErrorMessage, "nnnnnnnn") {
			t.Fatalf("a message quotes the huge name: %.100s", *r.ErrorMessage)
		}
	}
	img := f.ctrl.Image()
	if got := slices.Sorted(maps.Keys(img.ScramCredentials)); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("users with credentials %q, want alice and bob (nothing of the refused ones sent)", got)
	}

	// Every user, sorted; mechanisms by Kafka's number.
	alterScram(t, f, nil, scramUp("alice", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) {
		u.Mechanism, u.Iterations, u.SaltedPassword = 1, 4096, make([]byte, 32)
	}))
	all := describeScram(t, f)
	adminWantCode(t, "describe all", all.ErrorCode, nil)
	if len(all.Results) != 2 || all.Results[0].User != "alice" || all.Results[1].User != "bob" {
		t.Fatalf("describe all: %+v", all.Results)
	}
	a := all.Results[0]
	if ci := a.CredentialInfos; len(ci) != 2 || ci[0].Mechanism != 1 || ci[0].Iterations != 4096 || ci[1].Mechanism != 2 || ci[1].Iterations != 8192 {
		t.Fatalf("alice: %+v", a.CredentialInfos)
	}
	if wire := all.AppendTo(nil); bytes.Contains(wire, []byte("SECRET-SALT")) || bytes.Contains(wire, bytes.Repeat([]byte{'K'}, 32)) {
		t.Fatal("the describe response carries a salt or a key")
	}

	// Named users: once each, in the order named.
	named := describeScram(t, f, "bob", "nobody", "bob", "alice", "")
	adminWantCode(t, "describe named", named.ErrorCode, nil)
	for i, w := range []scramWant{
		{"bob", kerr.DuplicateResource, "same user twice"},
		{"nobody", kerr.ResourceNotFound, "does not exist"},
		{"alice", nil, ""},
		{"", kerr.ResourceNotFound, "does not exist"},
	} {
		if i >= len(named.Results) || named.Results[i].User != w.user {
			t.Fatalf("describe named: %+v", named.Results)
		}
		r := named.Results[i]
		adminWantCode(t, "describe "+w.user, r.ErrorCode, w.code)
		if w.code != nil && (r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, w.msg) || len(r.CredentialInfos) != 0) {
			t.Errorf("describe %s: %s %+v, want %q and no credentials", w.user, adminMsg(r.ErrorMessage), r.CredentialInfos, w.msg)
		}
	}
	if len(named.Results) != 4 {
		t.Fatalf("describe named: %d results, want 4", len(named.Results))
	}

	// Deleting: the last credential gone, the user is not found.
	resp = alterScram(t, f, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDel("bob", 1)})
	checkScramResults(t, resp.Results, []scramWant{{"bob", nil, ""}})
	adminWantCode(t, "bob after deleting", describeScram(t, f, "bob").Results[0].ErrorCode, kerr.ResourceNotFound)
}

// Hostile sizes are refused before any work: too many alterations whole
// (each user answered once, the controller not asked), too many users
// to describe with a top-level error; and a controller that cannot
// answer leaves each forwarded user its error, each refused one its own.
func TestUserScramCredentialsBounds(t *testing.T) {
	f := newAdminFixture(t)
	var many []kmsg.AlterUserSCRAMCredentialsRequestUpsertion
	for i := range maxScramAlterations + 1 {
		many = append(many, scramUp("u"+strings.Repeat("x", i%3)))
	}
	resp := alterScram(t, f, nil, many...)
	checkScramResults(t, resp.Results, []scramWant{
		{"u", kerr.InvalidRequest, "1001 alterations in one request (at most 1000)"},
		{"ux", kerr.InvalidRequest, "at most 1000"},
		{"uxx", kerr.InvalidRequest, "at most 1000"},
	})
	if calls := f.ctrl.callLog(); len(calls) != 0 {
		t.Fatalf("the controller was asked %v", calls)
	}

	users := make([]string, maxScramDescribeUsers+1)
	for i := range users {
		users[i] = "u"
	}
	d := describeScram(t, f, users...)
	adminWantCode(t, "describe too many", d.ErrorCode, kerr.InvalidRequest)
	if d.ErrorMessage == nil || !strings.Contains(*d.ErrorMessage, "10001 users in one request") || len(d.Results) != 0 {
		t.Fatalf("describe too many: %s, %d results", adminMsg(d.ErrorMessage), len(d.Results))
	}

	f.ctrl.fail = kerr.NotController
	resp = alterScram(t, f, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDel("alice", 2)}, scramUp("bob", func(u *kmsg.AlterUserSCRAMCredentialsRequestUpsertion) { u.Iterations = 0 }))
	checkScramResults(t, resp.Results, []scramWant{{"alice", kerr.NotController, ""}, {"bob", kerr.UnacceptableCredential, "too few iterations"}})
}
