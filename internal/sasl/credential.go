package sasl

// A SCRAM credential, as RFC 5802 section 3 derives it and KIP-554 stores
// it (UserScramCredentialRecord):
//
//	SaltedPassword = Hi(password, salt, iterations)     PBKDF2-HMAC-H
//	ClientKey      = HMAC(SaltedPassword, "Client Key")
//	StoredKey      = H(ClientKey)                       stored
//	ServerKey      = HMAC(SaltedPassword, "Server Key") stored
//
// Neither stored key gives the password or the ClientKey back, so the
// metadata log can be read without learning how to log in; a client
// proves it knows ClientKey by a proof that only StoredKey can check.
//
// The password is not SASLprep-normalised (RFC 4013), because Kafka's
// clients and kafka-configs do not normalise it either: a password with
// characters that SASLprep would change must salt to the same bytes here
// as there.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"

	"github.com/xdg-go/scram"
)

// Kafka's bounds on a SCRAM credential's iterations (ScramMechanism's
// minIterations; the controller's MAX_ITERATIONS). Every Kafka client
// refuses a server first message with fewer than 4096.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = MinIterations
)

// saltBytes is the length of the salts NewCredential makes and of the
// decoy credential's, so that a decoy's salt looks like a real one.
const saltBytes = 32

// ScramCredential is what the metadata log stores for one user and SCRAM
// mechanism: never the password.
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

// String hides the keys and the salt, as Kafka's toString does, so that
// a credential logged by mistake gives nothing away.
func (c ScramCredential) String() string {
	return fmt.Sprintf("ScramCredential(%s, iterations=%d, salt=[hidden], keys=[hidden])", c.Mechanism, c.Iterations)
}

// GoString is String, for %#v.
func (c ScramCredential) GoString() string { return c.String() }

// scramHash returns mechanism's hash and its size.
func scramHash(mechanism string) (scram.HashGeneratorFcn, int, error) {
	switch mechanism {
	case ScramSHA256:
		return scram.SHA256, 32, nil
	case ScramSHA512:
		return scram.SHA512, 64, nil
	}
	return nil, 0, fmt.Errorf("%w: %q is not a SCRAM mechanism", ErrUnsupportedMechanism, mechanism)
}

func checkIterations(iterations int32) error {
	switch {
	case iterations < MinIterations:
		return fmt.Errorf("%w: too few iterations: %d < %d", ErrUnacceptableCredential, iterations, MinIterations)
	case iterations > MaxIterations:
		return fmt.Errorf("%w: too many iterations: %d > %d", ErrUnacceptableCredential, iterations, MaxIterations)
	}
	return nil
}

// validate checks c is a credential the SCRAM exchange can use. A
// credential from the metadata log went through
// CredentialFromSaltedPassword, but the log may hold one written by an
// older version with other rules.
func (c ScramCredential) validate() error {
	_, size, err := scramHash(c.Mechanism)
	if err != nil {
		return err
	}
	if err := checkIterations(c.Iterations); err != nil {
		return err
	}
	if len(c.Salt) == 0 {
		return fmt.Errorf("%w: empty salt", ErrUnacceptableCredential)
	}
	if len(c.StoredKey) != size || len(c.ServerKey) != size {
		return fmt.Errorf("%w: %s keys of %d and %d bytes, want %d", ErrUnacceptableCredential,
			c.Mechanism, len(c.StoredKey), len(c.ServerKey), size)
	}
	return nil
}

// CredentialFromSaltedPassword makes the credential an
// AlterUserScramCredentials upsertion describes: the client sends the
// salt, the iterations and SaltedPassword = Hi(password, salt,
// iterations), never the password. Errors: ErrUnsupportedMechanism for a
// mechanism that is not SCRAM, ErrUnacceptableCredential for iterations
// outside [MinIterations, MaxIterations], an empty salt or a salted
// password that is not as long as the mechanism's hash.
func CredentialFromSaltedPassword(mechanism string, salt, saltedPassword []byte, iterations int32) (ScramCredential, error) {
	hash, size, err := scramHash(mechanism)
	if err != nil {
		return ScramCredential{}, err
	}
	if err := checkIterations(iterations); err != nil {
		return ScramCredential{}, err
	}
	if len(salt) == 0 {
		return ScramCredential{}, fmt.Errorf("%w: empty salt", ErrUnacceptableCredential)
	}
	if len(saltedPassword) != size {
		return ScramCredential{}, fmt.Errorf("%w: salted password of %d bytes, %s needs %d",
			ErrUnacceptableCredential, len(saltedPassword), mechanism, size)
	}
	// xdg-go/scram derives these keys only from a password (its Client),
	// and this starts from the salted password, so the two HMACs and the
	// hash of RFC 5802 section 3 are written out here.
	// TestCredentialFromSaltedPasswordMatchesLibrary checks they agree.
	clientKey := hmacSum(hash, saltedPassword, "Client Key")
	stored := hash()
	stored.Write(clientKey)
	return ScramCredential{
		Mechanism:  mechanism,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  stored.Sum(nil),
		ServerKey:  hmacSum(hash, saltedPassword, "Server Key"),
		Iterations: iterations,
	}, nil
}

func hmacSum(hash scram.HashGeneratorFcn, key []byte, data string) []byte {
	m := hmac.New(hash, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

// NewCredential salts password with a fresh random salt: for the CLI,
// development setups and tests. A client of AlterUserScramCredentials
// salts the password itself (CredentialFromSaltedPassword).
func NewCredential(mechanism, password string, iterations int32) (ScramCredential, error) {
	if _, _, err := scramHash(mechanism); err != nil {
		return ScramCredential{}, err
	}
	if err := checkIterations(iterations); err != nil {
		return ScramCredential{}, err
	}
	if password == "" {
		return ScramCredential{}, fmt.Errorf("%w: empty password", ErrUnacceptableCredential)
	}
	salt := make([]byte, saltBytes)
	if _, err := rand.Read(salt); err != nil {
		return ScramCredential{}, fmt.Errorf("sasl: salt: %w", err)
	}
	return credentialFromPassword(mechanism, password, salt, iterations)
}

// credentialFromPassword derives the credential with xdg-go/scram's
// client, which does what a Kafka client does to log in.
// REQUIRES: mechanism is a SCRAM one and iterations are checked.
func credentialFromPassword(mechanism, password string, salt []byte, iterations int32) (ScramCredential, error) {
	hash, _, err := scramHash(mechanism)
	if err != nil {
		return ScramCredential{}, err
	}
	client, err := hash.NewClientUnprepped("", password, "")
	if err != nil {
		return ScramCredential{}, err
	}
	sc, err := client.GetStoredCredentialsWithError(scram.KeyFactors{Salt: string(salt), Iters: int(iterations)})
	if err != nil {
		return ScramCredential{}, fmt.Errorf("sasl: deriving %s credential: %w", mechanism, err)
	}
	return ScramCredential{
		Mechanism:  mechanism,
		Salt:       append([]byte(nil), salt...),
		StoredKey:  sc.StoredKey,
		ServerKey:  sc.ServerKey,
		Iterations: iterations,
	}, nil
}

// VerifyPassword reports whether password is the one c was made from. It
// costs one PBKDF2 of c.Iterations rounds (a few milliseconds), which is
// the point: a guesser pays it too. It compares in constant time, and is
// false for a credential that validate refuses (which also bounds the
// cost at MaxIterations). For PLAIN and for HTTP basic authentication.
func VerifyPassword(c ScramCredential, password string) bool {
	if c.validate() != nil {
		return false
	}
	derived, err := credentialFromPassword(c.Mechanism, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	return subtle.ConstantTimeCompare(derived.StoredKey, c.StoredKey) == 1
}

// decoyCredential is what an unknown user authenticates against, so that
// a SCRAM exchange for one runs to its end and fails at the proof, as a
// wrong password does, instead of at the first message, and PLAIN spends
// the same PBKDF2: neither the step that fails nor (roughly) the time
// tells a guesser whether the user exists. Its salt is keyed by the
// server's secret and the user, so that asking twice gives the same salt,
// as it does for a real user; nobody knows a password that matches it.
//
// What still differs: a real user's iterations may not be
// DefaultIterations, and its salt length depends on the tool that made
// it.
func decoyCredential(secret *[32]byte, user, mechanism string) ScramCredential {
	_, size, err := scramHash(mechanism)
	if err != nil {
		panic(fmt.Sprintf("sasl: decoy credential for mechanism %q", mechanism))
	}
	derive := func(label string, n int) []byte {
		out := make([]byte, 0, n)
		for i := byte(0); len(out) < n; i++ {
			m := hmac.New(sha256.New, secret[:])
			m.Write([]byte{i})
			m.Write([]byte(label + "\x00" + mechanism + "\x00" + user))
			out = m.Sum(out)
		}
		return out[:n]
	}
	return ScramCredential{
		Mechanism:  mechanism,
		Salt:       derive("salt", saltBytes),
		StoredKey:  derive("stored", size),
		ServerKey:  derive("server", size),
		Iterations: DefaultIterations,
	}
}
