package metadata

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
)

func quotaBase(t *testing.T) *Image {
	t.Helper()
	img, err := baseImage(t).Apply(11, MetadataVersionRecord{Version: ClientQuotaMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestValidateQuotaEntity(t *testing.T) {
	for _, e := range []QuotaEntity{
		{User: Named("alice")}, {User: DefaultName()}, {ClientID: Named("app")}, {ClientID: DefaultName()},
		{User: Named("alice"), ClientID: Named("app")}, {User: DefaultName(), ClientID: DefaultName()},
		{IP: Named("10.0.0.7")}, {IP: Named("2001:db8::1")}, {IP: DefaultName()},
	} {
		if err := ValidateQuotaEntity(e); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
	for _, c := range []struct {
		e   QuotaEntity
		msg string
	}{
		{QuotaEntity{}, "names no type"},
		{QuotaEntity{IP: Named("10.0.0.7"), User: Named("a")}, "cannot be combined"},
		{QuotaEntity{IP: DefaultName(), ClientID: DefaultName()}, "cannot be combined"},
		{QuotaEntity{User: Named("")}, "empty name"},
		{QuotaEntity{ClientID: Named(strings.Repeat("c", MaxQuotaNameBytes+1))}, "bytes"},
		{QuotaEntity{ClientID: Named("\xff\xfe")}, "UTF-8"},
		{QuotaEntity{IP: Named("10.0.0.300")}, "not an IP address"},
		{QuotaEntity{IP: Named("host.example.com")}, "not an IP address"},
		{QuotaEntity{IP: Named("::ffff:10.0.0.7")}, "give it as 10.0.0.7"},
		{QuotaEntity{IP: Named("0:0:0:0:0:0:0:1")}, "give it as ::1"},
		{QuotaEntity{IP: Named("fe80::1%eth0")}, "give it as fe80::1"},
		{QuotaEntity{User: QuotaName{Set: true, Default: true, Name: "x"}}, "default carries no name"},
	} {
		if err := ValidateQuotaEntity(c.e); !errors.Is(err, ErrInvalidQuota) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: %v, want ErrInvalidQuota saying %q", c.e, err, c.msg)
		}
	}
}

func TestValidateQuotaValue(t *testing.T) {
	user, ip := QuotaEntity{User: Named("a")}, QuotaEntity{IP: DefaultName()}
	for _, c := range []struct {
		e   QuotaEntity
		key string
		v   float64
	}{
		{user, QuotaProducerByteRate, 1}, {user, QuotaConsumerByteRate, 1 << 40}, {user, QuotaRequestPercentage, 0.5},
		{user, QuotaRequestPercentage, 400}, {user, QuotaControllerMutationRate, 0.1}, {ip, QuotaConnectionCreationRate, 20},
	} {
		if err := ValidateQuotaValue(c.e, c.key, c.v); err != nil {
			t.Errorf("%s %s=%v: %v", c.e, c.key, c.v, err)
		}
	}
	for _, c := range []struct {
		e   QuotaEntity
		key string
		v   float64
		msg string
	}{
		{user, "producer_rate", 5, "unknown quota key"},
		{user, QuotaProducerByteRate, 0, "at most"},
		{user, QuotaProducerByteRate, -1, "at most"},
		{user, QuotaProducerByteRate, math.NaN(), "at most"},
		{user, QuotaProducerByteRate, math.Inf(1), "at most"},
		{user, QuotaProducerByteRate, 1.5, "whole number"},
		{user, QuotaProducerByteRate, 1e300, "at most"},
		{user, QuotaRequestPercentage, 1e7, "at most"},
		{user, QuotaConnectionCreationRate, 5, "ip entities only"},
		{ip, QuotaProducerByteRate, 5, "takes connection_creation_rate only"},
		{ip, QuotaConnectionCreationRate, 2.5, "whole number"},
	} {
		if err := ValidateQuotaValue(c.e, c.key, c.v); !errors.Is(err, ErrInvalidQuota) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %s=%v: %v, want ErrInvalidQuota saying %q", c.e, c.key, c.v, err, c.msg)
		}
	}
}

// ClientQuotaRecord, from metadata version 8: sets and removes keys, an
// entity without keys is forgotten, the image before is untouched, a
// snapshot keeps them, and a record no controller writes is refused.
func TestApplyClientQuota(t *testing.T) {
	alice := QuotaEntity{User: Named("alice")}
	if _, err := baseImage(t).Apply(11, ClientQuotaRecord{Entity: alice, Key: QuotaProducerByteRate, Value: 5}); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 8") {
		t.Fatalf("quota in an old log: %v, want ErrBadRecord naming version 8", err)
	}
	base := quotaBase(t)
	set, err := base.Apply(12,
		ClientQuotaRecord{Entity: alice, Key: QuotaProducerByteRate, Value: 1 << 20},
		&ClientQuotaRecord{Entity: alice, Key: QuotaConsumerByteRate, Value: 2 << 20},
		ClientQuotaRecord{Entity: QuotaEntity{IP: DefaultName()}, Key: QuotaConnectionCreationRate, Value: 30})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := set.ClientQuota(alice, QuotaConsumerByteRate); !ok || v != 2<<20 || len(set.ClientQuotas) != 2 {
		t.Fatalf("after setting: %v", set.ClientQuotas)
	}
	if len(base.ClientQuotas) != 0 {
		t.Fatal("applying changed the image before")
	}
	got, b := roundTrip(t, set)
	if len(got.ClientQuotas) != 2 || got.ClientQuotas[alice][QuotaProducerByteRate] != 1<<20 {
		t.Fatalf("snapshot lost quotas: %v\n%s", got.ClientQuotas, b)
	}
	one, err := set.Apply(13, ClientQuotaRecord{Entity: alice, Key: QuotaProducerByteRate, Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := one.ClientQuota(alice, QuotaProducerByteRate); ok || len(one.ClientQuotas[alice]) != 1 {
		t.Fatalf("after removing one key: %v", one.ClientQuotas)
	}
	if _, ok := set.ClientQuota(alice, QuotaProducerByteRate); !ok {
		t.Fatal("removing changed the image before")
	}
	none, err := one.Apply(14, ClientQuotaRecord{Entity: alice, Key: QuotaConsumerByteRate, Remove: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := none.ClientQuotas[alice]; ok || len(none.ClientQuotas) != 1 {
		t.Fatalf("an entity without keys is kept: %v", none.ClientQuotas)
	}
	for _, c := range []struct {
		rec Record
		msg string
	}{
		{ClientQuotaRecord{Key: QuotaProducerByteRate, Value: 5}, "names no type"},
		{ClientQuotaRecord{Entity: alice, Key: "bogus", Value: 5}, "unknown quota key"},
		{ClientQuotaRecord{Entity: alice, Key: QuotaProducerByteRate, Value: -5}, "at most"},
		{ClientQuotaRecord{Entity: QuotaEntity{IP: Named("nope")}, Key: QuotaConnectionCreationRate, Value: 5}, "not an IP"},
		{(*ClientQuotaRecord)(nil), "nil"},
	} {
		if _, err := base.Apply(12, c.rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: %v, want ErrBadRecord saying %q", c.rec, err, c.msg)
		}
	}
}

// The entities with quotas are bounded.
func TestClientQuotaEntitiesBounded(t *testing.T) {
	img := quotaBase(t)
	recs := make([]Record, 0, MaxClientQuotaEntities)
	for i := range MaxClientQuotaEntities {
		recs = append(recs, ClientQuotaRecord{Entity: QuotaEntity{ClientID: Named("client-" + strconv.Itoa(i))}, Key: QuotaProducerByteRate, Value: 1})
	}
	full, err := img.Apply(12, recs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := full.Apply(13, ClientQuotaRecord{Entity: QuotaEntity{User: Named("one-more")}, Key: QuotaProducerByteRate, Value: 1}); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("one entity past the bound: %v", err)
	}
}
