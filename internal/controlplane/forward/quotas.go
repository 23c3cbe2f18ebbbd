package forward

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// AlterClientQuotas implements controlplane.Client with Kafka's
// AlterClientQuotas, sent to the active controller.
func (c *Client) AlterClientQuotas(ctx context.Context, alts []controlplane.QuotaAlteration, validateOnly bool) (errs []error, err error) {
	err = c.do(ctx, func(ctx context.Context) error {
		var err error
		errs, err = c.cfg.Local.AlterClientQuotas(ctx, alts, validateOnly)
		return err
	}, func(ctx context.Context) error {
		req := kmsg.NewPtrAlterClientQuotasRequest()
		req.ValidateOnly = validateOnly
		for _, a := range alts {
			re := kmsg.NewAlterClientQuotasRequestEntry()
			for _, p := range []struct {
				typ string
				n   metadata.QuotaName
			}{{metadata.QuotaEntityUser, a.Entity.User}, {metadata.QuotaEntityClientID, a.Entity.ClientID}, {metadata.QuotaEntityIP, a.Entity.IP}} {
				if !p.n.Set {
					continue
				}
				ee := kmsg.NewAlterClientQuotasRequestEntryEntity()
				ee.Type = p.typ
				if !p.n.Default {
					name := p.n.Name
					ee.Name = &name
				}
				re.Entity = append(re.Entity, ee)
			}
			for _, op := range a.Ops {
				o := kmsg.NewAlterClientQuotasRequestEntryOp()
				o.Key, o.Value, o.Remove = op.Key, op.Value, op.Remove
				re.Ops = append(re.Ops, o)
			}
			req.Entries = append(req.Entries, re)
		}
		resp, offset, err := c.send(ctx, req)
		if err != nil {
			return err
		}
		entries := resp.(*kmsg.AlterClientQuotasResponse).Entries
		if len(entries) != len(alts) {
			return fmt.Errorf("%w: the controller answered %d entries for %d", controlplane.ErrTimedOut, len(entries), len(alts))
		}
		errs = make([]error, len(alts))
		changed := false
		for i, e := range entries {
			errs[i] = codeError(e.ErrorCode, e.ErrorMessage)
			changed = changed || errs[i] == nil
		}
		if !changed || validateOnly {
			return nil
		}
		return c.await(ctx, offset)
	})
	return errs, err
}
