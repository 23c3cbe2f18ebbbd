package controller_test

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/sasl"
)

// saltedUpsertion is what a Kafka client sends for password: the salt
// and Hi(password, salt, iterations), as kadm computes it.
func saltedUpsertion(t *testing.T, user string, mechanism int8, password string) controlplane.ScramUpsertion {
	t.Helper()
	salt := []byte("salt-of-" + user)
	var (
		salted []byte
		err    error
	)
	if mechanism == 1 {
		salted, err = pbkdf2.Key(sha256.New, password, salt, 4096, sha256.Size)
	} else {
		salted, err = pbkdf2.Key(sha512.New, password, salt, 4096, sha512.Size)
	}
	if err != nil {
		t.Fatal(err)
	}
	return controlplane.ScramUpsertion{User: user, Mechanism: mechanism, Iterations: 4096, Salt: salt, SaltedPassword: salted}
}

// verifies reports whether password logs user in with mechanism against
// the controller's image, through the SASL layer's own check and the
// conversion it makes from the image's credential.
func verifies(img *metadata.Image, user, mechanism, password string) bool {
	c, ok := img.ScramCredential(user, mechanism)
	return ok && sasl.VerifyPassword(sasl.ScramCredential(c), password)
}

// Reference: KIP-554. AlterScramCredentials commits the good users in one
// entry, with keys that verify the client's password (and only it);
// a replacement takes over; a deletion forgets; a request every user of
// which is refused commits nothing.
func TestAlterScramCredentials(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	ctx := ctxT(t)
	if v := c.Image().MetadataVersion; v < metadata.ScramMetadataVersion {
		t.Fatalf("a new log is at metadata version %d, below SCRAM's %d", v, metadata.ScramMetadataVersion)
	}
	before := c.Image()
	results, err := c.AlterScramCredentials(ctx, []controlplane.ScramUpsertion{
		saltedUpsertion(t, "alice", 2, "alice-secret"),
		saltedUpsertion(t, "bob", 1, "bob-secret"),
		{User: "carol", Mechanism: 2, Iterations: 100, Salt: []byte("s"), SaltedPassword: make([]byte, 64)},
	}, []controlplane.ScramDeletion{{User: "dave", Mechanism: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 4 || results[0].User != "dave" || !errors.Is(results[0].Err, kerr.ResourceNotFound) ||
		results[1].Err != nil || results[2].Err != nil || !errors.Is(results[3].Err, metadata.ErrUnacceptableCredential) {
		t.Fatalf("results %+v, want dave RESOURCE_NOT_FOUND, alice and bob altered, carol UNACCEPTABLE_CREDENTIAL", results)
	}
	img := c.Image()
	if img == before || len(img.ScramCredentials) != 2 {
		t.Fatalf("credentials after the change: %v", img.ScramCredentials)
	}
	if !verifies(img, "alice", metadata.ScramSHA512, "alice-secret") || verifies(img, "alice", metadata.ScramSHA512, "bob-secret") ||
		!verifies(img, "bob", metadata.ScramSHA256, "bob-secret") || verifies(img, "bob", metadata.ScramSHA512, "bob-secret") {
		t.Fatal("the stored credentials do not verify exactly the passwords salted")
	}

	// A user named twice, though for two mechanisms, is refused whole
	// (Kafka's KRaft controller): nothing is committed.
	results, err = c.AlterScramCredentials(ctx, nil, []controlplane.ScramDeletion{{User: "alice", Mechanism: 2}, {User: "alice", Mechanism: 1}})
	if err != nil || len(results) != 1 || !errors.Is(results[0].Err, kerr.DuplicateResource) || c.Image() != img {
		t.Fatalf("alice twice: %v %+v, committed %v", err, results, c.Image() != img)
	}
	// A new password replaces the old.
	if results, err = c.AlterScramCredentials(ctx, []controlplane.ScramUpsertion{saltedUpsertion(t, "bob", 1, "new-secret")}, nil); err != nil || results[0].Err != nil {
		t.Fatalf("replacing bob's: %v %+v", err, results)
	}
	if img := c.Image(); !verifies(img, "bob", metadata.ScramSHA256, "new-secret") || verifies(img, "bob", metadata.ScramSHA256, "bob-secret") {
		t.Fatal("bob's old password still verifies, or the new one does not")
	}
	// Deleting the last credential forgets the user; again, it is not
	// found.
	for i, want := range []error{nil, kerr.ResourceNotFound} {
		results, err = c.AlterScramCredentials(ctx, nil, []controlplane.ScramDeletion{{User: "alice", Mechanism: 2}})
		if err != nil || len(results) != 1 || !errors.Is(results[0].Err, want) {
			t.Fatalf("deletion %d: %v %+v, want %v", i, err, results, want)
		}
	}
	if img := c.Image(); len(img.ScramCredentials) != 1 || img.ScramCredentials["alice"] != nil {
		t.Fatalf("after deleting alice's: %v", img.ScramCredentials)
	}
}
