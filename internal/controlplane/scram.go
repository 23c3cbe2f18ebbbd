package controlplane

import (
	"context"
	"fmt"

	"github.com/fjordmq/fjord/internal/metadata"
)

// ScramCredentials changes SCRAM credentials (KIP-554's
// AlterUserScramCredentials). It is part of Client.
type ScramCredentials interface {
	// AlterScramCredentials deletes and upserts users' SCRAM credentials
	// and answers each user named once, in the order first named
	// (deletions before upsertions, as the request lists them), as
	// Kafka's controller does: a user named twice in the request is
	// refused whole (kerr.DuplicateResource) and nothing of it changes,
	// unless its first entry is refused on its own (that refusal
	// stands); a deletion of a credential that does not exist is
	// kerr.ResourceNotFound; an empty, too long or non-UTF-8 user,
	// iterations outside metadata's bounds, a bad salt or a salted
	// password that is not the mechanism's hash's length is
	// metadata.ErrUnacceptableCredential; a mechanism that is not 1 or 2
	// is metadata.ErrUnsupportedScramMechanism; every user of a log
	// below metadata.ScramMetadataVersion is kerr.UnsupportedVersion.
	// The users without an error are committed together in one batch.
	// err is the whole request's (ErrNotController, ErrTimedOut): then
	// results is nil. The slices passed in are only read.
	AlterScramCredentials(ctx context.Context, upsertions []ScramUpsertion, deletions []ScramDeletion) (results []ScramResult, err error)
}

// ScramUpsertion sets one user's credential for one mechanism. The
// client salts the password itself: SaltedPassword is Hi(password, Salt,
// Iterations) (RFC 5802), never the password.
type ScramUpsertion struct {
	User string
	// Mechanism is Kafka's number: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
	// (metadata.ScramMechanismName).
	Mechanism      int8
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// ScramDeletion removes one user's credential for one mechanism.
type ScramDeletion struct {
	User      string
	Mechanism int8
}

// ScramResult answers one user of an AlterScramCredentials: Err nil
// when its alterations are committed.
type ScramResult struct {
	User string
	Err  error
}

// CheckScramDeletion applies the rules of a deletion that need no image,
// in Kafka's order: a user name (metadata.ValidateScramUser), then a
// SCRAM mechanism. It returns the mechanism's name. The Kafka edge
// checks each entry with it before asking the controller, which checks
// again, against its image.
func CheckScramDeletion(d ScramDeletion) (mechanism string, err error) {
	if err := metadata.ValidateScramUser(d.User); err != nil {
		return "", err
	}
	return scramMechanism(d.Mechanism)
}

// CheckScramUpsertion is CheckScramDeletion for an upsertion, and then
// the iterations, the salt, and a salted password as long as the
// mechanism's hash (metadata.ScramKeyBytes).
func CheckScramUpsertion(u ScramUpsertion) (mechanism string, err error) {
	if err := metadata.ValidateScramUser(u.User); err != nil {
		return "", err
	}
	if mechanism, err = scramMechanism(u.Mechanism); err != nil {
		return "", err
	}
	if err := metadata.ValidateScramIterations(u.Iterations); err != nil {
		return "", err
	}
	if err := metadata.ValidateScramSalt(u.Salt); err != nil {
		return "", err
	}
	if n := metadata.ScramKeyBytes(mechanism); len(u.SaltedPassword) != n {
		return "", fmt.Errorf("%w: a salted password of %d bytes (%s needs %d)", metadata.ErrUnacceptableCredential, len(u.SaltedPassword), mechanism, n)
	}
	return mechanism, nil
}

// scramMechanism is the mechanism Kafka's number names.
func scramMechanism(typ int8) (string, error) {
	m, ok := metadata.ScramMechanismName(typ)
	if !ok {
		return "", fmt.Errorf("%w: unknown SCRAM mechanism %d (want 1, SCRAM-SHA-256, or 2, SCRAM-SHA-512)", metadata.ErrUnsupportedScramMechanism, typ)
	}
	return m, nil
}
