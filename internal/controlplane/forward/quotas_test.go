package forward

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// AlterClientQuotas goes to the controller as Kafka's AlterClientQuotas,
// each entity as Kafka names it (a null name for a default); each
// entry's refusal comes back as its own error, and the change is waited
// for only when one entry went in.
func TestAlterClientQuotasForwarded(t *testing.T) {
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.AlterClientQuotasRequest)
		resp := r.ResponseKind().(*kmsg.AlterClientQuotasResponse)
		for _, e := range r.Entries {
			out := kmsg.NewAlterClientQuotasResponseEntry()
			if e.Ops[0].Value < 0 {
				out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr("want bytes per second")
			}
			resp.Entries = append(resp.Entries, out)
		}
		return resp
	})
	c, images, _ := newForwarder(t, f)
	alice := metadata.QuotaEntity{User: metadata.Named("alice"), ClientID: metadata.DefaultName()}
	errs, err := c.AlterClientQuotas(t.Context(), []controlplane.QuotaAlteration{
		{Entity: alice, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaProducerByteRate, Value: 1024}}},
		{Entity: metadata.QuotaEntity{IP: metadata.Named("10.0.0.7")}, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaConnectionCreationRate, Value: -1}}},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || !errors.Is(errs[1], kerr.InvalidRequest) || !strings.Contains(errs[1].Error(), "want bytes per second") {
		t.Fatalf("errors %v, want nil and the controller's INVALID_REQUEST", errs)
	}
	if got := images.waitedFor(); !slices.Equal(got, []uint64{taggedOffset}) {
		t.Fatalf("waited for %v, want the tagged offset", got)
	}
	r := f.requests()[0].(*kmsg.AlterClientQuotasRequest)
	e := r.Entries[0].Entity
	if len(e) != 2 || e[0].Type != "user" || *e[0].Name != "alice" || e[1].Type != "client-id" || e[1].Name != nil {
		t.Fatalf("entity sent as %+v, want user=alice, client-id=<default> (null)", e)
	}
	// Every entry refused: nothing to wait for.
	errs, err = c.AlterClientQuotas(t.Context(), []controlplane.QuotaAlteration{
		{Entity: alice, Ops: []controlplane.QuotaOp{{Key: metadata.QuotaProducerByteRate, Value: -5}}},
	}, false)
	if err != nil || errs[0] == nil || len(images.waitedFor()) != 1 {
		t.Fatalf("a refused change: %v %v, waited %v", err, errs, images.waitedFor())
	}
}
