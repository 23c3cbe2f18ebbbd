package forward

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
)

// AlterScramCredentials implements controlplane.Client with Kafka's
// AlterUserScramCredentials (v0, flexible: its answer carries the
// metadata-offset tag), sent to the active controller.
func (c *Client) AlterScramCredentials(ctx context.Context, upsertions []controlplane.ScramUpsertion, deletions []controlplane.ScramDeletion) (results []controlplane.ScramResult, err error) {
	err = c.do(ctx, func(ctx context.Context) error {
		var err error
		results, err = c.cfg.Local.AlterScramCredentials(ctx, upsertions, deletions)
		return err
	}, func(ctx context.Context) error {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		for _, d := range deletions {
			rd := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
			rd.Name, rd.Mechanism = d.User, d.Mechanism
			req.Deletions = append(req.Deletions, rd)
		}
		for _, u := range upsertions {
			ru := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
			ru.Name, ru.Mechanism, ru.Iterations, ru.Salt, ru.SaltedPassword = u.User, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword
			req.Upsertions = append(req.Upsertions, ru)
		}
		resp, offset, err := c.send(ctx, req)
		if err != nil {
			return err
		}
		// The controller answers each user once, in its own order;
		// results keep it. A user it did not answer is a controller
		// that does not serve the request as this node would: the
		// change may or may not be in, as with a lost answer.
		answered := resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results
		asked := map[string]bool{}
		for _, d := range deletions {
			asked[d.User] = true
		}
		for _, u := range upsertions {
			asked[u.User] = true
		}
		results = make([]controlplane.ScramResult, 0, len(answered))
		changed := false
		for _, r := range answered {
			if !asked[r.User] {
				return fmt.Errorf("%w: the controller answered for user %q, which was not asked for", controlplane.ErrTimedOut, r.User)
			}
			delete(asked, r.User)
			err := codeError(r.ErrorCode, r.ErrorMessage)
			results = append(results, controlplane.ScramResult{User: r.User, Err: err})
			changed = changed || err == nil
		}
		if len(asked) > 0 {
			return fmt.Errorf("%w: the controller answered %d users of %d", controlplane.ErrTimedOut, len(results), len(results)+len(asked))
		}
		// A node that is no longer the controller answers every user
		// NOT_CONTROLLER (the whole request's error, per user, as
		// Kafka's response has no other place for it): that is the
		// request's, to retry with the controller there is now.
		if len(results) > 0 && !changed && retriable(results[0].Err) {
			all := true
			for _, r := range results {
				all = all && retriable(r.Err)
			}
			if all {
				return results[0].Err
			}
		}
		if !changed {
			return nil
		}
		return c.await(ctx, offset)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}
