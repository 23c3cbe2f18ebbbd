package controller

import (
	"context"
	"fmt"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// AlterClientQuotas sets and removes client quotas (KIP-546): each
// alteration is checked on its own against the image (its entity, keys
// and values, and the bound on entities with quotas) and the good ones
// are committed together, a ClientQuotaRecord per key. errs[i] answers
// alts[i]; a key removed that is not set changes nothing.
func (c *Controller) AlterClientQuotas(ctx context.Context, alts []controlplane.QuotaAlteration, validateOnly bool) ([]error, error) {
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return nil, err
	}
	defer a.proposeMu.Unlock()
	if img.MetadataVersion < metadata.ClientQuotaMetadataVersion {
		return nil, fmt.Errorf("%w: client quotas need metadata version %d; the log is at %d",
			controlplane.ErrInvalidRequest, metadata.ClientQuotaMetadataVersion, img.MetadataVersion)
	}
	errs := make([]error, len(alts))
	var recs []metadata.Record
	entities := len(img.ClientQuotas)
	for i, alt := range alts {
		planned, err := planClientQuota(img, alt, &entities)
		if err != nil {
			errs[i] = err
			continue
		}
		recs = append(recs, planned...)
	}
	if validateOnly || len(recs) == 0 {
		return errs, nil
	}
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		return nil, err
	}
	c.log.Info("altered client quotas", "entities", len(alts), "records", len(recs))
	return errs, nil
}

// planClientQuota returns one alteration's records. entities counts the
// entities with quotas, this request's new ones included.
func planClientQuota(img *metadata.Image, alt controlplane.QuotaAlteration, entities *int) ([]metadata.Record, error) {
	if err := metadata.ValidateQuotaEntity(alt.Entity); err != nil {
		return nil, err
	}
	cur := img.ClientQuotas[alt.Entity]
	keys := map[string]bool{}
	var recs []metadata.Record
	adds := false
	for _, op := range alt.Ops {
		if keys[op.Key] {
			return nil, fmt.Errorf("%w: key %q given twice", metadata.ErrInvalidQuota, op.Key)
		}
		keys[op.Key] = true
		value := op.Value
		if op.Remove {
			value = 1
		}
		if err := metadata.ValidateQuotaValue(alt.Entity, op.Key, value); err != nil {
			return nil, err
		}
		if op.Remove {
			if _, ok := cur[op.Key]; ok {
				recs = append(recs, metadata.ClientQuotaRecord{Entity: alt.Entity, Key: op.Key, Remove: true})
			}
			continue
		}
		if v, ok := cur[op.Key]; !ok || v != op.Value {
			recs = append(recs, metadata.ClientQuotaRecord{Entity: alt.Entity, Key: op.Key, Value: op.Value})
			adds = true
		}
	}
	if adds && cur == nil {
		if *entities >= metadata.MaxClientQuotaEntities {
			return nil, fmt.Errorf("%w: %d entities have quotas already (at most %d); remove some first",
				metadata.ErrInvalidQuota, *entities, metadata.MaxClientQuotaEntities)
		}
		*entities++
	}
	return recs, nil
}
