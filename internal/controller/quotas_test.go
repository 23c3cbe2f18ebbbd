package controller_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// AlterClientQuotas commits each good alteration and refuses each bad
// one on its own; removing an unset key and setting a key to its value
// commit nothing.
func TestAlterClientQuotas(t *testing.T) {
	t.Parallel()
	c := open(t, baseConfig(t, t.TempDir()))
	ctx := ctxT(t)
	alice := metadata.QuotaEntity{User: metadata.Named("alice")}
	anyClient := metadata.QuotaEntity{ClientID: metadata.DefaultName()}
	before := c.Image()
	errs, err := c.AlterClientQuotas(ctx, []controlplane.QuotaAlteration{
		{Entity: alice, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaProducerByteRate, Value: 1 << 20}, {Key: metadata.QuotaRequestPercentage, Value: 50}}},
		{Entity: metadata.QuotaEntity{IP: metadata.Named("10.0.0.7"), User: metadata.Named("x")}, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaConnectionCreationRate, Value: 5}}},
		{Entity: anyClient, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaConsumerByteRate, Value: -1}}},
		{Entity: anyClient, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaConsumerByteRate, Value: 5}, {Key: metadata.QuotaConsumerByteRate, Remove: true}}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, msg := range []string{"", "cannot be combined", "at most", "given twice"} {
		if msg == "" {
			if errs[i] != nil {
				t.Errorf("alteration %d: %v", i, errs[i])
			}
			continue
		}
		if !errors.Is(errs[i], metadata.ErrInvalidQuota) || !strings.Contains(errs[i].Error(), msg) {
			t.Errorf("alteration %d: %v, want ErrInvalidQuota saying %q", i, errs[i], msg)
		}
	}
	img := c.Image()
	if v, ok := img.ClientQuota(alice, metadata.QuotaProducerByteRate); !ok || v != 1<<20 || len(img.ClientQuotas) != 1 {
		t.Fatalf("quotas after the change: %v", img.ClientQuotas)
	}
	if img == before {
		t.Fatal("nothing committed")
	}

	// Nothing to change: no entry.
	errs, err = c.AlterClientQuotas(ctx, []controlplane.QuotaAlteration{
		{Entity: alice, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaProducerByteRate, Value: 1 << 20}, {Key: metadata.QuotaConsumerByteRate, Remove: true}}},
	}, false)
	if err != nil || errs[0] != nil || c.Image() != img {
		t.Fatalf("a change that changes nothing: %v %v, committed %v", err, errs, c.Image() != img)
	}
	// Validate only: checked, not committed.
	errs, err = c.AlterClientQuotas(ctx, []controlplane.QuotaAlteration{
		{Entity: anyClient, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaConsumerByteRate, Value: 5}}},
	}, true)
	if err != nil || errs[0] != nil || c.Image() != img {
		t.Fatalf("validate only: %v %v, committed %v", err, errs, c.Image() != img)
	}
	// Removing the last keys forgets the entity.
	errs, err = c.AlterClientQuotas(ctx, []controlplane.QuotaAlteration{
		{Entity: alice, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaProducerByteRate, Remove: true}, {Key: metadata.QuotaRequestPercentage, Remove: true}}},
	}, false)
	if err != nil || errs[0] != nil || len(c.Image().ClientQuotas) != 0 {
		t.Fatalf("removing every key: %v %v, quotas %v", err, errs, c.Image().ClientQuotas)
	}
}
