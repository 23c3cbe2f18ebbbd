package metadata

import (
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"
)

// SCRAM credentials (KIP-554's AlterUserScramCredentials and
// DescribeUserScramCredentials; issue 20, slice 2), kept in the metadata
// log so every node authenticates the same users from its own image.
//
// A credential is what RFC 5802 section 3 lets a server keep instead of
// the password: the salt and iteration count the client salts with, and
// StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
// HMAC(SaltedPassword, "Server Key"), each as long as the mechanism's
// hash. Neither gives the password back. The controller derives them
// from the salted password a client sends (internal/sasl,
// CredentialFromSaltedPassword); this package only keeps them, and does
// not import internal/sasl, so that the metadata stays a pure package.
//
// Invariants (Apply refuses a record that breaks one):
//   - a user has at most one credential per mechanism, and a user with
//     none has no entry;
//   - every credential in an image passes ValidateScramCredential and
//     its user ValidateScramUser;
//   - at most MaxScramUsers users have credentials.

// Kafka's SCRAM mechanism names (sasl.enabled.mechanisms), the same
// strings as internal/sasl's.
const (
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Kafka's bounds on a credential's iterations: ScramMechanism's
// minimum for both mechanisms, and the controller's MAX_ITERATIONS.
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
)

// MaxScramUserBytes bounds a user name. Kafka sets no bound but the
// protocol's (32767 bytes); this one is a quota entity's
// (MaxQuotaNameBytes), so a user that can log in can also be given a
// quota, and a hostile admin client cannot put megabytes per user in
// every node's image.
const MaxScramUserBytes = MaxQuotaNameBytes

// MaxScramSaltBytes bounds a salt. Kafka sets none; its tools make salts
// of about 26 bytes, franz-go's kadm 24 and Fjord's own 32, so this is
// many times what any tool sends.
const MaxScramSaltBytes = 256

// MaxScramUsers bounds the users with credentials, as
// MaxClientQuotaEntities bounds quotas: every node keeps them all in
// memory.
const MaxScramUsers = 100_000

// Refusals of a credential, each the Kafka error AlterUserScramCredentials
// answers it with (wrapped with detail, matched with errors.Is).
var (
	// ErrUnacceptableCredential: an empty, too long or non-UTF-8 user
	// name; iterations outside [MinScramIterations,
	// MaxScramIterations]; an empty or too long salt; keys that are not
	// the mechanism's hash's length (UNACCEPTABLE_CREDENTIAL).
	ErrUnacceptableCredential = kerr.UnacceptableCredential
	// ErrUnsupportedScramMechanism: a mechanism that is neither
	// SCRAM-SHA-256 nor SCRAM-SHA-512 (UNSUPPORTED_SASL_MECHANISM).
	ErrUnsupportedScramMechanism = kerr.UnsupportedSaslMechanism
)

// ScramMechanismName is the mechanism Kafka's type number names on the
// wire (ScramMechanism: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512; 0 is UNKNOWN).
func ScramMechanismName(typ int8) (string, bool) {
	switch typ {
	case 1:
		return ScramSHA256, true
	case 2:
		return ScramSHA512, true
	}
	return "", false
}

// ScramMechanismType is mechanism's type number on the wire, 0 (Kafka's
// UNKNOWN) for a name that is not a SCRAM mechanism.
func ScramMechanismType(mechanism string) int8 {
	switch mechanism {
	case ScramSHA256:
		return 1
	case ScramSHA512:
		return 2
	}
	return 0
}

// ScramKeyBytes is the length of mechanism's keys and salted password
// (its hash's output), 0 for a name that is not a SCRAM mechanism.
func ScramKeyBytes(mechanism string) int {
	switch mechanism {
	case ScramSHA256:
		return 32
	case ScramSHA512:
		return 64
	}
	return 0
}

// ScramCredential is one user's credential for one mechanism. Its fields
// are internal/sasl's ScramCredential's, in the same order, so the SASL
// layer converts one to the other (sasl.ScramCredential(c)) without this
// package importing it. The slices are shared by every image that holds
// the credential: read them, never modify them.
type ScramCredential struct {
	// Mechanism is ScramSHA256 or ScramSHA512.
	Mechanism string
	Salt      []byte
	// StoredKey and ServerKey are as long as the mechanism's hash: 32
	// bytes for SHA-256, 64 for SHA-512.
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// String hides the salt and the keys, so that a credential (or an image)
// logged by mistake gives nothing away.
func (c ScramCredential) String() string {
	return fmt.Sprintf("ScramCredential(%s, iterations=%d, salt=[hidden], keys=[hidden])", c.Mechanism, c.Iterations)
}

// GoString is String, for %#v.
func (c ScramCredential) GoString() string { return c.String() }

// ValidateScramUser checks a user name: non-empty valid UTF-8 (a Kafka
// string) of at most MaxScramUserBytes.
func ValidateScramUser(user string) error {
	switch {
	case user == "":
		return fmt.Errorf("%w: the user name is empty", ErrUnacceptableCredential)
	case len(user) > MaxScramUserBytes:
		return fmt.Errorf("%w: a user name of %d bytes (at most %d)", ErrUnacceptableCredential, len(user), MaxScramUserBytes)
	case !utf8.ValidString(user):
		return fmt.Errorf("%w: the user name is not valid UTF-8", ErrUnacceptableCredential)
	}
	return nil
}

// ValidateScramMechanism checks that mechanism is a SCRAM one.
func ValidateScramMechanism(mechanism string) error {
	if ScramKeyBytes(mechanism) == 0 {
		return fmt.Errorf("%w: %q is not a SCRAM mechanism (want %s or %s)", ErrUnsupportedScramMechanism,
			shortForMessage(mechanism), ScramSHA256, ScramSHA512)
	}
	return nil
}

// ValidateScramIterations checks an iteration count against Kafka's
// bounds, in Kafka's words.
func ValidateScramIterations(iterations int32) error {
	switch {
	case iterations < MinScramIterations:
		return fmt.Errorf("%w: too few iterations: %d (at least %d)", ErrUnacceptableCredential, iterations, MinScramIterations)
	case iterations > MaxScramIterations:
		return fmt.Errorf("%w: too many iterations: %d (at most %d)", ErrUnacceptableCredential, iterations, MaxScramIterations)
	}
	return nil
}

// ValidateScramSalt checks a salt's length: 1 to MaxScramSaltBytes.
func ValidateScramSalt(salt []byte) error {
	switch {
	case len(salt) == 0:
		return fmt.Errorf("%w: the salt is empty", ErrUnacceptableCredential)
	case len(salt) > MaxScramSaltBytes:
		return fmt.Errorf("%w: a salt of %d bytes (at most %d)", ErrUnacceptableCredential, len(salt), MaxScramSaltBytes)
	}
	return nil
}

// ValidateScramCredential checks a credential: a SCRAM mechanism, its
// iterations and salt, and keys of the mechanism's hash's length.
func ValidateScramCredential(c ScramCredential) error {
	if err := ValidateScramMechanism(c.Mechanism); err != nil {
		return err
	}
	if err := ValidateScramIterations(c.Iterations); err != nil {
		return err
	}
	if err := ValidateScramSalt(c.Salt); err != nil {
		return err
	}
	if n := ScramKeyBytes(c.Mechanism); len(c.StoredKey) != n || len(c.ServerKey) != n {
		return fmt.Errorf("%w: %s keys of %d and %d bytes (want %d)", ErrUnacceptableCredential,
			c.Mechanism, len(c.StoredKey), len(c.ServerKey), n)
	}
	return nil
}

// ScramCredential returns user's credential for mechanism: the lookup
// the SASL layer makes for each SCRAM or PLAIN authentication. It may be
// called from any goroutine (an Image is immutable); the credential's
// slices are the image's, to be read only.
func (img *Image) ScramCredential(user, mechanism string) (ScramCredential, bool) {
	c, ok := img.ScramCredentials[user][mechanism]
	return c, ok
}

// ScramMetadataVersion is the first metadata version with
// ScramCredentialRecord and RemoveScramCredentialRecord.
const ScramMetadataVersion int32 = 10

// ScramCredentialRecord sets a user's credential for one mechanism,
// adding it or replacing the one the user had (Kafka's
// UserScramCredentialRecord). It holds what the controller derived from
// the client's salted password, never the password.
type ScramCredentialRecord struct {
	User       string `json:"user"`
	Mechanism  string `json:"mechanism"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
	Iterations int32  `json:"iterations"`
}

// RemoveScramCredentialRecord removes a user's credential for one
// mechanism (Kafka's RemoveUserScramCredentialRecord); a user left with
// none is forgotten.
//
// A record kind of its own rather than a Remove flag on
// ScramCredentialRecord (as ClientQuotaRecord has): a removal carries no
// salt, keys or iterations, so with a flag every rule of a credential
// would need an exception for removals, and a removal with keys in it
// would be a record whose meaning depends on which fields Apply reads.
// Two kinds keep each record checkable on its own, as Kafka's are.
type RemoveScramCredentialRecord struct {
	User      string `json:"user"`
	Mechanism string `json:"mechanism"`
}

// String hides the salt and keys, as ScramCredential's does.
func (r ScramCredentialRecord) String() string {
	return fmt.Sprintf("ScramCredentialRecord(user=%q, %s)", shortForMessage(r.User), r.credential())
}

// GoString is String, for %#v.
func (r ScramCredentialRecord) GoString() string { return r.String() }

func (r ScramCredentialRecord) credential() ScramCredential {
	return ScramCredential{Mechanism: r.Mechanism, Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey, Iterations: r.Iterations}
}

// scramCredential applies a ScramCredentialRecord: checked as
// AlterUserScramCredentials checks an upsertion, so a record no
// controller could have written stops the log here rather than reaching
// an image.
func (d *draft) scramCredential(r ScramCredentialRecord) error {
	if err := d.requireVersion(ScramMetadataVersion, "SCRAM credentials"); err != nil {
		return err
	}
	if err := ValidateScramUser(r.User); err != nil {
		return err
	}
	c := r.credential()
	if err := ValidateScramCredential(c); err != nil {
		return fmt.Errorf("user %q: %w", shortForMessage(r.User), err)
	}
	cur := d.next.ScramCredentials[r.User]
	if cur == nil && len(d.next.ScramCredentials) >= MaxScramUsers {
		return fmt.Errorf("%w: %d users have SCRAM credentials already (at most %d)", ErrUnacceptableCredential, len(d.next.ScramCredentials), MaxScramUsers)
	}
	// The image owns its bytes: a caller's record may be reused.
	c.Salt, c.StoredKey, c.ServerKey = slices.Clone(c.Salt), slices.Clone(c.StoredKey), slices.Clone(c.ServerKey)
	next := cloneMap(cur)
	next[r.Mechanism] = c
	d.setScramUser(r.User, next)
	return nil
}

// removeScramCredential applies a RemoveScramCredentialRecord: the
// credential must exist (the controller answers RESOURCE_NOT_FOUND
// rather than write one that does not; Kafka's replay refuses it too).
func (d *draft) removeScramCredential(r RemoveScramCredentialRecord) error {
	if err := d.requireVersion(ScramMetadataVersion, "SCRAM credentials"); err != nil {
		return err
	}
	if err := ValidateScramMechanism(r.Mechanism); err != nil {
		return err
	}
	cur := d.next.ScramCredentials[r.User]
	if _, ok := cur[r.Mechanism]; !ok {
		return fmt.Errorf("user %q has no %s credential to remove", shortForMessage(r.User), r.Mechanism)
	}
	next := cloneMap(cur)
	delete(next, r.Mechanism)
	d.setScramUser(r.User, next)
	return nil
}

// setScramUser makes creds user's credentials (none: the user is
// forgotten), copying the image's map the first time this batch changes
// it; the per-user maps are replaced whole, never edited.
func (d *draft) setScramUser(user string, creds map[string]ScramCredential) {
	if !d.scramCopied {
		d.next.ScramCredentials = cloneMap(d.next.ScramCredentials)
		d.scramCopied = true
	}
	if len(creds) == 0 {
		delete(d.next.ScramCredentials, user)
	} else {
		d.next.ScramCredentials[user] = creds
	}
	if len(d.next.ScramCredentials) == 0 {
		// nil when there is none, so images compare (and snapshots
		// round-trip) the same however they got there.
		d.next.ScramCredentials = nil
		d.scramCopied = false
	}
}

// scramCredentialRecords lists credentials as records, sorted by user
// and mechanism, for a snapshot.
func scramCredentialRecords(creds map[string]map[string]ScramCredential) []ScramCredentialRecord {
	var out []ScramCredentialRecord
	for _, user := range slices.Sorted(maps.Keys(creds)) {
		for _, m := range slices.Sorted(maps.Keys(creds[user])) {
			c := creds[user][m]
			out = append(out, ScramCredentialRecord{User: user, Mechanism: m, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
		}
	}
	return out
}

func (ScramCredentialRecord) Type() string       { return "scram_credential" }
func (RemoveScramCredentialRecord) Type() string { return "remove_scram_credential" }
