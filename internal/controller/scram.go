package controller

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/sasl"
)

// AlterScramCredentials deletes and upserts SCRAM credentials (KIP-554),
// with Kafka's controller's rules (ScramControlManager), and commits
// every user that passes them in one batch: a ScramCredentialRecord per
// upsertion, with the keys derived here from the client's salted
// password, and a RemoveScramCredentialRecord per deletion. Results
// answer each user once (controlplane.ScramCredentials).
func (c *Controller) AlterScramCredentials(ctx context.Context, upsertions []controlplane.ScramUpsertion, deletions []controlplane.ScramDeletion) ([]controlplane.ScramResult, error) {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return nil, err
	}
	defer a.proposeMu.Unlock()
	results, recs := planScramCredentials(img, upsertions, deletions)
	if len(recs) == 0 {
		return results, nil
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		return nil, err
	}
	c.log.Info("altered SCRAM credentials", "users", len(results), "records", len(recs))
	return results, nil
}

// Kafka's words for the refusals the controller makes itself (the
// others are metadata's validators').
const (
	msgScramDuplicate = "a user credential cannot be altered twice in the same request"
	msgScramNotFound  = "attempt to delete a user credential that does not exist"
)

// planScramCredentials decides an AlterUserScramCredentials against img:
// a result for each user, in the order first named (deletions, then
// upsertions), and the records of the users without an error, in the
// same order.
//
// Kafka's rules, in its order: a user is looked at until it has an error
// (a later entry for a refused user changes nothing, not even to
// DUPLICATE_RESOURCE); a second entry for a user whose first was good
// refuses the user whole with DUPLICATE_RESOURCE, whatever the
// mechanisms (Kafka's KRaft controller; its ZooKeeper path allowed one
// entry per mechanism); then the metadata version, the user name, the
// mechanism, and for a deletion that the credential exists, for an
// upsertion the iterations, the salt and the salted password. Last, the
// bound on users with credentials (Fjord's), counting the new users in
// the order named.
func planScramCredentials(img *metadata.Image, upsertions []controlplane.ScramUpsertion, deletions []controlplane.ScramDeletion) ([]controlplane.ScramResult, []metadata.Record) {
	var (
		order   []string
		errs    = map[string]error{}
		pending = map[string]metadata.Record{}
	)
	// claim reports whether user's entry is to be checked: the user's
	// first, and no refusal yet. A second entry refuses the first.
	claim := func(user string) bool {
		err, named := errs[user]
		switch {
		case !named:
			order = append(order, user)
			errs[user] = nil
			return true
		case err != nil:
			return false
		}
		delete(pending, user)
		errs[user] = fmt.Errorf("%w: %s", kerr.DuplicateResource, msgScramDuplicate)
		return false
	}
	versionErr := func() error {
		if img.MetadataVersion < metadata.ScramMetadataVersion {
			return fmt.Errorf("%w: SCRAM credentials need metadata version %d; the log is at %d",
				kerr.UnsupportedVersion, metadata.ScramMetadataVersion, img.MetadataVersion)
		}
		return nil
	}
	for _, d := range deletions {
		if !claim(d.User) {
			continue
		}
		rec, err := planScramDeletion(img, d, versionErr)
		if err != nil {
			errs[d.User] = err
			continue
		}
		pending[d.User] = rec
	}
	for _, u := range upsertions {
		if !claim(u.User) {
			continue
		}
		rec, err := planScramUpsertion(u, versionErr)
		if err != nil {
			errs[u.User] = err
			continue
		}
		pending[u.User] = rec
	}

	results := make([]controlplane.ScramResult, 0, len(order))
	var recs []metadata.Record
	users := len(img.ScramCredentials)
	for _, user := range order {
		rec, ok := pending[user]
		if _, upsert := rec.(metadata.ScramCredentialRecord); upsert && img.ScramCredentials[user] == nil {
			if users >= metadata.MaxScramUsers {
				errs[user] = fmt.Errorf("%w: %d users have SCRAM credentials already (at most %d); delete some first",
					metadata.ErrUnacceptableCredential, users, metadata.MaxScramUsers)
				ok = false
			} else {
				users++
			}
		}
		if ok {
			recs = append(recs, rec)
		}
		results = append(results, controlplane.ScramResult{User: user, Err: errs[user]})
	}
	return results, recs
}

// planScramDeletion checks one deletion.
func planScramDeletion(img *metadata.Image, d controlplane.ScramDeletion, versionErr func() error) (metadata.Record, error) {
	if err := versionErr(); err != nil {
		return nil, err
	}
	mechanism, err := controlplane.CheckScramDeletion(d)
	if err != nil {
		return nil, err
	}
	if _, ok := img.ScramCredential(d.User, mechanism); !ok {
		return nil, fmt.Errorf("%w: %s (the user has no %s credential)", kerr.ResourceNotFound, msgScramNotFound, mechanism)
	}
	return metadata.RemoveScramCredentialRecord{User: d.User, Mechanism: mechanism}, nil
}

// planScramUpsertion checks one upsertion and derives its credential:
// StoredKey and ServerKey from the salted password (RFC 5802 section
// 3), which is then dropped.
func planScramUpsertion(u controlplane.ScramUpsertion, versionErr func() error) (metadata.Record, error) {
	if err := versionErr(); err != nil {
		return nil, err
	}
	mechanism, err := controlplane.CheckScramUpsertion(u)
	if err != nil {
		return nil, err
	}
	cred, err := sasl.CredentialFromSaltedPassword(mechanism, u.Salt, u.SaltedPassword, u.Iterations)
	if err == nil {
		// sasl and metadata hold the same rules; a credential metadata
		// would refuse must not reach a proposal, where it would refuse
		// the whole batch.
		err = metadata.ValidateScramCredential(metadata.ScramCredential(cred))
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", metadata.ErrUnacceptableCredential, err)
	}
	return metadata.ScramCredentialRecord{User: u.User, Mechanism: cred.Mechanism, Salt: cred.Salt,
		StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations}, nil
}
