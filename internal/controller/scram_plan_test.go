package controller

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// scramImage is a log at metadata version 10 where alice has a
// SCRAM-SHA-256 credential.
func scramImage(t *testing.T, version int32) *metadata.Image {
	t.Helper()
	img, err := metadata.Empty(testConfigs).Apply(1, metadata.ClusterIDRecord{ClusterID: "c"}, metadata.MetadataVersionRecord{Version: version})
	if err != nil {
		t.Fatal(err)
	}
	if version < metadata.ScramMetadataVersion {
		return img
	}
	img, err = img.Apply(2, metadata.ScramCredentialRecord{User: "alice", Mechanism: metadata.ScramSHA256, Iterations: 4096,
		Salt: []byte("salt"), StoredKey: make([]byte, 32), ServerKey: make([]byte, 32)})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// upsert is a good SCRAM-SHA-512 upsertion for user (mechanism 2).
func upsert(user string) controlplane.ScramUpsertion {
	return controlplane.ScramUpsertion{User: user, Mechanism: 2, Iterations: 4096, Salt: []byte("pepper"), SaltedPassword: bytes.Repeat([]byte{1}, 64)}
}

func upsertWith(user string, change func(*controlplane.ScramUpsertion)) controlplane.ScramUpsertion {
	u := upsert(user)
	change(&u)
	return u
}

// Reference: KIP-554 and Kafka's ScramControlManager. Each rule of an
// AlterUserScramCredentials, one user each, with the code and message it
// is answered with; a result per user in the order first named
// (deletions first); records only for the users without an error.
func TestPlanScramCredentials(t *testing.T) {
	img := scramImage(t, metadata.ScramMetadataVersion)
	ups := []controlplane.ScramUpsertion{
		upsert("bob"),
		upsertWith("carol", func(u *controlplane.ScramUpsertion) {
			u.Mechanism, u.Iterations, u.SaltedPassword = 1, 16384, make([]byte, 32)
		}),
		upsert("dave"), upsert("dave"), // twice: refused whole
		upsert("erin"), // her deletion was refused: not looked at
		upsertWith("", func(*controlplane.ScramUpsertion) {}),
		upsertWith("frank", func(u *controlplane.ScramUpsertion) { u.Mechanism = 3 }),
		upsertWith("frank2", func(u *controlplane.ScramUpsertion) { u.Mechanism = 0 }),
		upsertWith("gina", func(u *controlplane.ScramUpsertion) { u.Iterations = 4095 }),
		upsertWith("gina2", func(u *controlplane.ScramUpsertion) { u.Iterations = 16385 }),
		upsertWith("hank", func(u *controlplane.ScramUpsertion) { u.SaltedPassword = make([]byte, 32) }), // SHA-512 needs 64
		upsertWith("hank2", func(u *controlplane.ScramUpsertion) { u.SaltedPassword = nil }),
		upsertWith("ivan", func(u *controlplane.ScramUpsertion) { u.Salt = nil }),
		upsertWith("ivan2", func(u *controlplane.ScramUpsertion) { u.Salt = make([]byte, metadata.MaxScramSaltBytes+1) }),
		upsertWith(strings.Repeat("j", metadata.MaxScramUserBytes+1), func(*controlplane.ScramUpsertion) {}),
		upsertWith("\xff", func(*controlplane.ScramUpsertion) {}),
		// Refused first, then named again: the first refusal stands
		// (Kafka looks no further at a refused user).
		upsertWith("kate", func(u *controlplane.ScramUpsertion) { u.Iterations = 1 }), upsert("kate"),
		// Deleted too: refused whole, and her deletion with it.
		upsert("alice"),
	}
	dels := []controlplane.ScramDeletion{
		{User: "nobody", Mechanism: 1},
		{User: "erin", Mechanism: 2},
		{User: "alice-typo", Mechanism: 1},
		{User: "", Mechanism: 1},
		{User: "zed", Mechanism: 9},
		{User: "alice", Mechanism: 1},
	}
	results, recs := planScramCredentials(img, ups, dels)
	want := []struct {
		user string
		err  error
		msg  string
	}{
		{"nobody", kerr.ResourceNotFound, "attempt to delete a user credential that does not exist (the user has no SCRAM-SHA-256 credential)"},
		{"erin", kerr.ResourceNotFound, "does not exist"},
		{"alice-typo", kerr.ResourceNotFound, "does not exist"},
		{"", metadata.ErrUnacceptableCredential, "user name is empty"},
		{"zed", metadata.ErrUnsupportedScramMechanism, "unknown SCRAM mechanism 9"},
		{"alice", kerr.DuplicateResource, "a user credential cannot be altered twice in the same request"},
		{"bob", nil, ""},
		{"carol", nil, ""},
		{"dave", kerr.DuplicateResource, "twice"},
		{"frank", metadata.ErrUnsupportedScramMechanism, "unknown SCRAM mechanism 3"},
		{"frank2", metadata.ErrUnsupportedScramMechanism, "unknown SCRAM mechanism 0"},
		{"gina", metadata.ErrUnacceptableCredential, "too few iterations: 4095"},
		{"gina2", metadata.ErrUnacceptableCredential, "too many iterations: 16385"},
		{"hank", metadata.ErrUnacceptableCredential, "a salted password of 32 bytes (SCRAM-SHA-512 needs 64)"},
		{"hank2", metadata.ErrUnacceptableCredential, "salted password of 0 bytes"},
		{"ivan", metadata.ErrUnacceptableCredential, "salt is empty"},
		{"ivan2", metadata.ErrUnacceptableCredential, "salt of 257 bytes"},
		{strings.Repeat("j", metadata.MaxScramUserBytes+1), metadata.ErrUnacceptableCredential, "1025 bytes"},
		{"\xff", metadata.ErrUnacceptableCredential, "UTF-8"},
		{"kate", metadata.ErrUnacceptableCredential, "too few iterations: 1"},
	}
	if len(results) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(results), len(want), results)
	}
	for i, w := range want {
		r := results[i]
		switch {
		case r.User != w.user:
			t.Errorf("result %d is for %.20q, want %.20q", i, r.User, w.user)
		case w.err == nil && r.Err != nil:
			t.Errorf("%s: %v", w.user, r.Err)
		case w.err != nil && (!errors.Is(r.Err, w.err) || !strings.Contains(r.Err.Error(), w.msg)):
			t.Errorf("%.20q: %v, want %v saying %q", w.user, r.Err, w.err, w.msg)
		}
	}
	var users []string
	for _, r := range recs {
		up, ok := r.(metadata.ScramCredentialRecord)
		if !ok {
			t.Fatalf("record %v, want only upserts", r)
		}
		users = append(users, up.User+" "+up.Mechanism)
	}
	if !slices.Equal(users, []string{"bob SCRAM-SHA-512", "carol SCRAM-SHA-256"}) {
		t.Fatalf("records for %q", users)
	}
	// The records apply to the image they were planned against.
	next, err := img.Apply(3, recs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := next.ScramCredential("alice", metadata.ScramSHA256); !ok || len(next.ScramCredentials) != 3 {
		t.Fatalf("after the plan: %v", next.ScramCredentials)
	}

	// A deletion of what exists is a removal record.
	results, recs = planScramCredentials(next, nil, []controlplane.ScramDeletion{{User: "alice", Mechanism: 1}})
	if len(results) != 1 || results[0].Err != nil || len(recs) != 1 ||
		recs[0] != (metadata.RemoveScramCredentialRecord{User: "alice", Mechanism: metadata.ScramSHA256}) {
		t.Fatalf("deleting alice's SCRAM-SHA-256: %+v %v", results, recs)
	}
	// Nothing asked: nothing answered, nothing committed.
	if results, recs := planScramCredentials(next, nil, nil); len(results) != 0 || len(recs) != 0 {
		t.Fatalf("an empty request: %+v %v", results, recs)
	}
}

// A log below metadata version 10 refuses every user UNSUPPORTED_VERSION,
// as Kafka's controller does below its SCRAM version, and commits
// nothing.
func TestPlanScramCredentialsOldLog(t *testing.T) {
	img := scramImage(t, metadata.ScramMetadataVersion-1)
	results, recs := planScramCredentials(img, []controlplane.ScramUpsertion{upsert("bob")}, []controlplane.ScramDeletion{{User: "alice", Mechanism: 1}})
	if len(recs) != 0 || len(results) != 2 {
		t.Fatalf("%+v %v", results, recs)
	}
	for _, r := range results {
		if !errors.Is(r.Err, kerr.UnsupportedVersion) || !strings.Contains(r.Err.Error(), "metadata version 10") {
			t.Errorf("%s: %v, want UNSUPPORTED_VERSION naming version 10", r.User, r.Err)
		}
	}
}
