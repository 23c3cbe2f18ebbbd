package metadata

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Client quotas (KIP-546's DescribeClientQuotas and AlterClientQuotas;
// issue 19): Kafka's entity types and quota keys, kept in the metadata
// log (ClientQuotaRecord) so every node enforces the same. Each node
// enforces them on its own traffic, as Kafka's brokers do
// (internal/quota).

// Kafka's quota entity types.
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// Kafka's quota keys.
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// QuotaName is one entity type's part of a quota entity: absent (Set
// false), Kafka's default (<default>, a null name on the wire), or a
// name.
type QuotaName struct {
	Set     bool   `json:"set,omitempty"`
	Default bool   `json:"default,omitempty"`
	Name    string `json:"name,omitempty"`
}

// Named is the part for name; DefaultName is <default>.
func Named(name string) QuotaName { return QuotaName{Set: true, Name: name} }

// DefaultName is an entity type's <default>.
func DefaultName() QuotaName { return QuotaName{Set: true, Default: true} }

func (n QuotaName) String() string {
	switch {
	case !n.Set:
		return ""
	case n.Default:
		return "<default>"
	}
	return n.Name
}

// QuotaEntity is who a quota applies to: a user, a client id, both, or an
// IP address (Kafka's allowed combinations).
type QuotaEntity struct {
	User     QuotaName `json:"user,omitzero"`
	ClientID QuotaName `json:"client_id,omitzero"`
	IP       QuotaName `json:"ip,omitzero"`
}

func (e QuotaEntity) String() string {
	var s string
	add := func(typ string, n QuotaName) {
		if !n.Set {
			return
		}
		if s != "" {
			s += ","
		}
		s += typ + "=" + n.String()
	}
	add(QuotaEntityUser, e.User)
	add(QuotaEntityClientID, e.ClientID)
	add(QuotaEntityIP, e.IP)
	return s
}

// ErrInvalidQuota is a quota entity, key or value Kafka would refuse;
// the Kafka edge answers it INVALID_REQUEST, as Kafka does.
var ErrInvalidQuota = errors.New("invalid client quota")

// MaxQuotaNameBytes bounds an entity name. Kafka sets no bound; client
// ids longer than this would be unusual, and every node keeps every
// quota in memory.
const MaxQuotaNameBytes = 1024

// MaxClientQuotaEntities bounds the entities with quotas, so a hostile
// admin client cannot grow every node's image without end.
const MaxClientQuotaEntities = 100_000

// ValidateQuotaEntity checks an entity: user, client-id, both, or ip
// alone; names non-empty valid UTF-8 of at most MaxQuotaNameBytes; an
// ip a literal address (or <default>).
func ValidateQuotaEntity(e QuotaEntity) error {
	switch {
	case !e.User.Set && !e.ClientID.Set && !e.IP.Set:
		return fmt.Errorf("%w: the entity names no type (want user, client-id, both, or ip)", ErrInvalidQuota)
	case e.IP.Set && (e.User.Set || e.ClientID.Set):
		return fmt.Errorf("%w: entity %s: ip cannot be combined with user or client-id", ErrInvalidQuota, shortForMessage(e.String()))
	}
	for _, p := range []struct {
		typ string
		n   QuotaName
	}{{QuotaEntityUser, e.User}, {QuotaEntityClientID, e.ClientID}, {QuotaEntityIP, e.IP}} {
		if !p.n.Set || p.n.Default {
			if p.n.Default && p.n.Name != "" {
				return fmt.Errorf("%w: %s: the default carries no name", ErrInvalidQuota, p.typ)
			}
			continue
		}
		switch {
		case p.n.Name == "":
			return fmt.Errorf("%w: %s: an empty name (for the default, send a null name)", ErrInvalidQuota, p.typ)
		case len(p.n.Name) > MaxQuotaNameBytes:
			return fmt.Errorf("%w: %s: a name of %d bytes (at most %d)", ErrInvalidQuota, p.typ, len(p.n.Name), MaxQuotaNameBytes)
		case !utf8.ValidString(p.n.Name):
			return fmt.Errorf("%w: %s: the name is not valid UTF-8", ErrInvalidQuota, p.typ)
		}
		if p.typ == QuotaEntityIP {
			addr, err := netip.ParseAddr(p.n.Name)
			if err != nil {
				return fmt.Errorf("%w: ip %q is not an IP address", ErrInvalidQuota, shortForMessage(p.n.Name))
			}
			// One address, one entity: connections are matched by their
			// unmapped address without a zone, so ::ffff:10.0.0.7 and
			// 10.0.0.7 must not be two entities.
			if c := CanonicalQuotaIP(addr); c != p.n.Name {
				return fmt.Errorf("%w: ip %q: give it as %s", ErrInvalidQuota, shortForMessage(p.n.Name), c)
			}
		}
	}
	return nil
}

// CanonicalQuotaIP is addr as an ip entity names it: unmapped, without
// a zone, in Go's canonical text (RFC 5952 for IPv6).
func CanonicalQuotaIP(addr netip.Addr) string { return addr.Unmap().WithZone("").String() }

// quotaKeys are the keys each kind of entity takes, with the largest
// value allowed and whether it must be whole.
var quotaKeys = map[string]struct {
	ip    bool // an ip entity's key (else a user or client-id entity's)
	max   float64
	whole bool
	doc   string
}{
	QuotaProducerByteRate:       {max: math.MaxInt64, whole: true, doc: "bytes per second"},
	QuotaConsumerByteRate:       {max: math.MaxInt64, whole: true, doc: "bytes per second"},
	QuotaRequestPercentage:      {max: 1e6, doc: "percent of one core's time, over 0"},
	QuotaControllerMutationRate: {max: 1e9, doc: "partitions created or deleted per second, over 0"},
	QuotaConnectionCreationRate: {ip: true, max: math.MaxInt32, whole: true, doc: "connections per second"},
}

// QuotaKeyIsWhole reports whether key's values are whole numbers (the
// byte and connection rates), for printing them.
func QuotaKeyIsWhole(key string) bool { return quotaKeys[key].whole }

// ValidateQuotaValue checks one key's value for entity e (already
// valid): a key of e's kind, a finite value above 0 and at most the
// key's maximum, whole where the key counts bytes or connections.
func ValidateQuotaValue(e QuotaEntity, key string, v float64) error {
	k, ok := quotaKeys[key]
	switch {
	case !ok:
		return fmt.Errorf("%w: unknown quota key %q (want %s, %s, %s, %s or %s)", ErrInvalidQuota, shortForMessage(key),
			QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage, QuotaControllerMutationRate, QuotaConnectionCreationRate)
	case k.ip && !e.IP.Set:
		return fmt.Errorf("%w: %s applies to ip entities only", ErrInvalidQuota, key)
	case !k.ip && e.IP.Set:
		return fmt.Errorf("%w: an ip entity takes %s only, not %s", ErrInvalidQuota, QuotaConnectionCreationRate, key)
	case math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 || v > k.max:
		return fmt.Errorf("%w: %s=%v: want %s, at most %s (delete the quota to remove it)", ErrInvalidQuota, key, v, k.doc, strconv.FormatFloat(k.max, 'f', -1, 64))
	case k.whole && v != math.Trunc(v):
		return fmt.Errorf("%w: %s=%v: want a whole number of %s", ErrInvalidQuota, key, v, k.doc)
	}
	return nil
}

// ClientQuota returns the value of key set on exactly entity e.
func (img *Image) ClientQuota(e QuotaEntity, key string) (float64, bool) {
	v, ok := img.ClientQuotas[e][key]
	return v, ok
}

// ClientQuotaMetadataVersion is the first metadata version with
// ClientQuotaRecord.
const ClientQuotaMetadataVersion int32 = 8

// ClientQuotaRecord sets (or, with Remove, removes) one quota key of an
// entity (Kafka's ClientQuotaRecord). An entity left without keys is
// forgotten.
type ClientQuotaRecord struct {
	Entity QuotaEntity `json:"entity"`
	Key    string      `json:"key"`
	Value  float64     `json:"value,omitempty"`
	Remove bool        `json:"remove,omitempty"`
}

// clientQuota applies a ClientQuotaRecord: checked as AlterClientQuotas
// checks it, so a record no controller could have written stops the
// log here rather than reaching an image.
func (d *draft) clientQuota(r ClientQuotaRecord) error {
	if err := d.requireVersion(ClientQuotaMetadataVersion, "client quotas"); err != nil {
		return err
	}
	if err := ValidateQuotaEntity(r.Entity); err != nil {
		return err
	}
	value := r.Value
	if r.Remove {
		value = 1 // the key's name and kind are checked; the value is not stored
	}
	if err := ValidateQuotaValue(r.Entity, r.Key, value); err != nil {
		return err
	}
	cur := d.next.ClientQuotas[r.Entity]
	if !r.Remove && cur == nil && len(d.next.ClientQuotas) >= MaxClientQuotaEntities {
		return fmt.Errorf("%w: %d entities have quotas already (at most %d)", ErrInvalidQuota, len(d.next.ClientQuotas), MaxClientQuotaEntities)
	}
	if !d.quotasCopied {
		d.next.ClientQuotas = cloneMap(d.next.ClientQuotas)
		d.quotasCopied = true
	}
	next := cloneMap(cur)
	if r.Remove {
		delete(next, r.Key)
	} else {
		next[r.Key] = r.Value
	}
	if len(next) == 0 {
		delete(d.next.ClientQuotas, r.Entity)
	} else {
		d.next.ClientQuotas[r.Entity] = next
	}
	if len(d.next.ClientQuotas) == 0 {
		d.next.ClientQuotas = nil
	}
	return nil
}

// clientQuotaRecords lists quotas as records, sorted by entity and key,
// for a snapshot.
func clientQuotaRecords(quotas map[QuotaEntity]map[string]float64) []ClientQuotaRecord {
	var out []ClientQuotaRecord
	entities := slices.SortedFunc(maps.Keys(quotas), func(a, b QuotaEntity) int { return strings.Compare(a.String(), b.String()) })
	for _, e := range entities {
		for _, k := range slices.Sorted(maps.Keys(quotas[e])) {
			out = append(out, ClientQuotaRecord{Entity: e, Key: k, Value: quotas[e][k]})
		}
	}
	return out
}
