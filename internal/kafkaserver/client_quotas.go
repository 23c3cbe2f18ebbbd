package kafkaserver

// DescribeClientQuotas: v0-1; AlterClientQuotas: v0-1 (KIP-546).
//
// The quotas live in the metadata log (metadata.ClientQuotaRecord), so
// Describe answers from this node's image and Alter goes to the active
// controller. An entity is Kafka's list of (type, name) pairs, a null
// name being the type's <default>; the allowed types are user,
// client-id (alone or together) and ip (alone). A bad entity, key or
// value is INVALID_REQUEST for that entry alone, as Kafka answers.
//
// Authorization, before anything else: DESCRIBE_CONFIGS on the cluster for
// Describe (denied: the top-level CLUSTER_AUTHORIZATION_FAILED, no
// entries), ALTER_CONFIGS on the cluster for Alter (denied: every entry
// answered CLUSTER_AUTHORIZATION_FAILED, as Kafka's error response, and
// the controller not asked, ValidateOnly alike).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// maxQuotaEntries bounds one AlterClientQuotas request; more entries
// than this are refused whole (a request is one metadata batch).
const maxQuotaEntries = 1000

// quotaEntity reads a request's entity: each type at most once, a known
// type, and a combination Kafka allows.
func quotaEntity(parts []struct {
	typ  string
	name *string
}) (metadata.QuotaEntity, error) {
	var e metadata.QuotaEntity
	for _, p := range parts {
		var slot *metadata.QuotaName
		switch p.typ {
		case metadata.QuotaEntityUser:
			slot = &e.User
		case metadata.QuotaEntityClientID:
			slot = &e.ClientID
		case metadata.QuotaEntityIP:
			slot = &e.IP
		default:
			return e, fmt.Errorf("%w: unknown entity type %q (want user, client-id or ip)", kerr.InvalidRequest, truncateForMessage(p.typ))
		}
		if slot.Set {
			return e, fmt.Errorf("%w: entity type %s given twice", kerr.InvalidRequest, p.typ)
		}
		*slot = metadata.DefaultName()
		if p.name != nil {
			name := *p.name
			if p.typ == metadata.QuotaEntityIP {
				// Kafka takes any form of an address; the log keeps
				// one (metadata.CanonicalQuotaIP).
				if addr, err := netip.ParseAddr(name); err == nil {
					name = metadata.CanonicalQuotaIP(addr)
				}
			}
			*slot = metadata.Named(name)
		}
	}
	if err := metadata.ValidateQuotaEntity(e); err != nil {
		return e, quotaErr(err)
	}
	return e, nil
}

// quotaErr turns metadata's refusal into the code Kafka answers.
func quotaErr(err error) error {
	if errors.Is(err, metadata.ErrInvalidQuota) {
		return fmt.Errorf("%w: %v", kerr.InvalidRequest, err)
	}
	return err
}

// entityParts lists e's parts in Kafka's order, for responses.
func entityParts(e metadata.QuotaEntity, add func(typ string, name *string)) {
	for _, p := range []struct {
		typ string
		n   metadata.QuotaName
	}{{metadata.QuotaEntityUser, e.User}, {metadata.QuotaEntityClientID, e.ClientID}, {metadata.QuotaEntityIP, e.IP}} {
		if !p.n.Set {
			continue
		}
		var name *string
		if !p.n.Default {
			n := p.n.Name
			name = &n
		}
		add(p.typ, name)
	}
}

func handleAlterClientQuotas(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AlterClientQuotasRequest)
	resp := kmsg.NewPtrAlterClientQuotasResponse()
	resp.SetVersion(req.version)
	answer := func(i int, err error) {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		for _, e := range r.Entries[i].Entity {
			ee := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = e.Type, e.Name
			re.Entity = append(re.Entity, ee)
		}
		re.ErrorCode, re.ErrorMessage = s.errorAndMessage(err, "AlterClientQuotas")
		resp.Entries = append(resp.Entries, re)
	}
	if err := s.clusterDenied(req, acl.OperationAlterConfigs); err != nil {
		for i := range r.Entries {
			answer(i, err)
		}
		return resp, nil, nil
	}
	if len(r.Entries) > maxQuotaEntries {
		for i := range r.Entries {
			answer(i, fmt.Errorf("%w: %d entries in one request (at most %d)", kerr.InvalidRequest, len(r.Entries), maxQuotaEntries))
		}
		return resp, nil, nil
	}
	errs := make([]error, len(r.Entries))
	var alts []controlplane.QuotaAlteration
	var altIdx []int
	seen := map[metadata.QuotaEntity]bool{}
	for i, entry := range r.Entries {
		parts := make([]struct {
			typ  string
			name *string
		}, len(entry.Entity))
		for j, e := range entry.Entity {
			parts[j].typ, parts[j].name = e.Type, e.Name
		}
		e, err := quotaEntity(parts)
		if err == nil && seen[e] {
			err = fmt.Errorf("%w: entity %s given twice", kerr.InvalidRequest, truncateForMessage(e.String()))
		}
		alt := controlplane.QuotaAlteration{Entity: e}
		keys := map[string]bool{}
		for _, op := range entry.Ops {
			if err != nil {
				break
			}
			switch {
			case keys[op.Key]:
				err = fmt.Errorf("%w: key %q given twice for entity %s", kerr.InvalidRequest, truncateForMessage(op.Key), truncateForMessage(e.String()))
			case op.Remove:
				// Removing is checked for the key's name and kind only:
				// the value is ignored, as Kafka ignores it.
				if verr := metadata.ValidateQuotaValue(e, op.Key, 1); verr != nil {
					err = quotaErr(verr)
				}
			default:
				if verr := metadata.ValidateQuotaValue(e, op.Key, op.Value); verr != nil {
					err = quotaErr(verr)
				}
			}
			keys[op.Key] = true
			alt.Ops = append(alt.Ops, controlplane.QuotaOp{Key: op.Key, Value: op.Value, Remove: op.Remove})
		}
		if err != nil {
			errs[i] = err
			continue
		}
		seen[e] = true
		alts = append(alts, alt)
		altIdx = append(altIdx, i)
	}
	if len(alts) > 0 {
		got, err := s.controller.AlterClientQuotas(ctx, alts, r.ValidateOnly)
		for k, i := range altIdx {
			switch {
			case err != nil:
				errs[i] = err
			case k < len(got):
				errs[i] = quotaErr(got[k])
			}
		}
	}
	for i := range r.Entries {
		answer(i, errs[i])
	}
	return resp, nil, nil
}

func handleDescribeClientQuotas(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeClientQuotasRequest)
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	resp.SetVersion(req.version)
	err := s.clusterDenied(req, acl.OperationDescribeConfigs)
	var match func(metadata.QuotaEntity) bool
	if err == nil {
		match, err = quotaFilter(r)
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "DescribeClientQuotas")
		return resp, nil, nil
	}
	quotas := s.image().ClientQuotas
	entities := slices.SortedFunc(maps.Keys(quotas), func(a, b metadata.QuotaEntity) int { return cmp.Compare(a.String(), b.String()) })
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{}
	for _, e := range entities {
		if !match(e) || len(quotas[e]) == 0 {
			continue
		}
		re := kmsg.NewDescribeClientQuotasResponseEntry()
		entityParts(e, func(typ string, name *string) {
			ee := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ee.Type, ee.Name = typ, name
			re.Entity = append(re.Entity, ee)
		})
		for _, k := range slices.Sorted(maps.Keys(quotas[e])) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, quotas[e][k]
			re.Values = append(re.Values, v)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil, nil
}

// quotaFilter reads DescribeClientQuotas' components into a matcher:
// each component's type must be in the entity, named as the component
// asks (exact name, the default, or any); with Strict, the entity has no
// other types.
func quotaFilter(r *kmsg.DescribeClientQuotasRequest) (func(metadata.QuotaEntity) bool, error) {
	type comp struct {
		get       func(metadata.QuotaEntity) metadata.QuotaName
		matchType kmsg.QuotasMatchType
		name      string
	}
	var comps []comp
	types := map[string]bool{}
	for _, c := range r.Components {
		var get func(metadata.QuotaEntity) metadata.QuotaName
		switch c.EntityType {
		case metadata.QuotaEntityUser:
			get = func(e metadata.QuotaEntity) metadata.QuotaName { return e.User }
		case metadata.QuotaEntityClientID:
			get = func(e metadata.QuotaEntity) metadata.QuotaName { return e.ClientID }
		case metadata.QuotaEntityIP:
			get = func(e metadata.QuotaEntity) metadata.QuotaName { return e.IP }
		default:
			return nil, fmt.Errorf("%w: unknown entity type %q (want user, client-id or ip)", kerr.InvalidRequest, truncateForMessage(c.EntityType))
		}
		if types[c.EntityType] {
			return nil, fmt.Errorf("%w: entity type %s given twice", kerr.InvalidRequest, c.EntityType)
		}
		types[c.EntityType] = true
		cc := comp{get: get, matchType: c.MatchType}
		switch c.MatchType {
		case 0: // exact
			if c.Match == nil {
				return nil, fmt.Errorf("%w: %s: an exact match needs a name (match type 1 is the default)", kerr.InvalidRequest, c.EntityType)
			}
			cc.name = *c.Match
		case 1, 2: // the default, any
			if c.Match != nil {
				return nil, fmt.Errorf("%w: %s: match type %d takes no name", kerr.InvalidRequest, c.EntityType, c.MatchType)
			}
		default:
			return nil, fmt.Errorf("%w: %s: unknown match type %d (0 exact, 1 default, 2 any)", kerr.InvalidRequest, c.EntityType, c.MatchType)
		}
		comps = append(comps, cc)
	}
	if types[metadata.QuotaEntityIP] && (types[metadata.QuotaEntityUser] || types[metadata.QuotaEntityClientID]) {
		return nil, fmt.Errorf("%w: ip cannot be combined with user or client-id", kerr.InvalidRequest)
	}
	return func(e metadata.QuotaEntity) bool {
		for _, c := range comps {
			n := c.get(e)
			switch {
			case !n.Set:
				return false
			case c.matchType == 0 && (n.Default || n.Name != c.name):
				return false
			case c.matchType == 1 && !n.Default:
				return false
			}
		}
		if r.Strict {
			for typ, n := range map[string]metadata.QuotaName{
				metadata.QuotaEntityUser: e.User, metadata.QuotaEntityClientID: e.ClientID, metadata.QuotaEntityIP: e.IP,
			} {
				if n.Set && !types[typ] {
					return false
				}
			}
		}
		return true
	}, nil
}
