package acl

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// A small universe, so that random bindings and requests collide: names
// that are prefixes of one another, the wildcard, "hardcode" and its
// prefixes, principals that are the caller, the wildcard and neither,
// hosts in several spellings.
var (
	genNames      = []string{"a", "ab", "abc", "b", "ba", "*", "hard", "hardcode"}
	genReqNames   = append(slices.Clone(genNames), "abcd", "", "*a", ClusterName)
	genPrincipals = []string{alice, bob, WildcardPrincipal, "Group:*"}
	genHosts      = []string{WildcardHost, "10.0.0.1", "10.0.0.2", "::1", "::ffff:10.0.0.1"}
	genAddrs      = []netip.Addr{host1, host2, netip.MustParseAddr("::1"), netip.MustParseAddr("::ffff:10.0.0.2"), {}}
	genTypes      = []ResourceType{ResourceTopic, ResourceGroup, ResourceCluster}
)

// genOperation favours the operations the implication rules are about,
// so that a random binding and a random request meet often.
func genOperation(t *rapid.T, label string) Operation {
	if rapid.IntRange(0, 3).Draw(t, label+"Rare") == 0 {
		return Operation(rapid.IntRange(int(OperationAll), int(OperationDescribeTokens)).Draw(t, label))
	}
	return rapid.SampledFrom([]Operation{OperationAll, OperationRead, OperationWrite, OperationDescribe, OperationDescribeConfigs, OperationAlterConfigs}).Draw(t, label)
}

func genBinding(t *rapid.T) Binding {
	rt := rapid.SampledFrom(genTypes).Draw(t, "type")
	name := rapid.SampledFrom(genNames).Draw(t, "name")
	if rt == ResourceCluster {
		name = ClusterName
	}
	pt := rapid.SampledFrom([]PatternType{PatternLiteral, PatternPrefixed}).Draw(t, "pattern")
	return Binding{
		Pattern: ResourcePattern{Type: rt, Name: name, PatternType: pt},
		Entry: Entry{
			Principal:  rapid.SampledFrom(genPrincipals).Draw(t, "principal"),
			Host:       rapid.SampledFrom(genHosts).Draw(t, "host"),
			Operation:  genOperation(t, "op"),
			Permission: rapid.SampledFrom([]Permission{PermissionAllow, PermissionDeny}).Draw(t, "permission"),
		},
	}
}

func genBindings(t *rapid.T, label string) []Binding {
	return rapid.SliceOfN(rapid.Custom(genBinding), 0, 12).Draw(t, label)
}

func genRequest(t *rapid.T) request {
	return request{
		principal: rapid.SampledFrom([]string{alice, bob, "Group:*"}).Draw(t, "reqPrincipal"),
		host:      rapid.SampledFrom(genAddrs).Draw(t, "reqHost"),
		op:        genOperation(t, "reqOp"),
		rt:        rapid.SampledFrom(genTypes).Draw(t, "reqType"),
		name:      rapid.SampledFrom(genReqNames).Draw(t, "reqName"),
	}
}

func genConfig(t *rapid.T) Config {
	var cfg Config
	if rapid.Bool().Draw(t, "hasSuperUser") {
		cfg.SuperUsers = []string{rapid.SampledFrom([]string{alice, WildcardPrincipal}).Draw(t, "superUser")}
	}
	cfg.AllowEveryoneIfNoACLFound = rapid.Bool().Draw(t, "allowIfNone")
	return cfg
}

// modelAuthorize is Kafka's rule written as plainly as possible: a scan
// of every binding, each sentence of StandardAuthorizerData one line. The
// index must agree with it.
func modelAuthorize(bindings []Binding, cfg Config, r request) bool {
	if slices.Contains(cfg.SuperUsers, r.principal) {
		return true
	}
	found, allowed := false, false
	for _, b := range bindings {
		p, e := b.Pattern, b.Entry
		applies := p.Type == r.rt && (p.PatternType == PatternLiteral && (p.Name == r.name || p.Name == "*") ||
			p.PatternType == PatternPrefixed && strings.HasPrefix(r.name, p.Name))
		if !applies {
			continue
		}
		found = true
		if e.Principal != r.principal && e.Principal != "User:*" {
			continue
		}
		if e.Host != "*" && netip.MustParseAddr(e.Host).Unmap() != r.host.Unmap() {
			continue
		}
		implied := e.Permission == PermissionAllow &&
			(r.op == OperationDescribe && slices.Contains([]Operation{OperationRead, OperationWrite, OperationDelete, OperationAlter}, e.Operation) ||
				r.op == OperationDescribeConfigs && e.Operation == OperationAlterConfigs)
		if e.Operation != OperationAll && e.Operation != r.op && !implied {
			continue
		}
		if e.Permission == PermissionDeny {
			return false
		}
		allowed = true
	}
	if allowed {
		return true
	}
	return !found && cfg.AllowEveryoneIfNoACLFound
}

// TestPropertyModel: the index answers as the plain scan of Kafka's rules,
// for every request of the small universe (all of them, not a sample, so
// that the rare meetings of a DENY and an implied operation are always
// tried), and "no ACL found" is exactly "a MATCH filter for the resource
// selects nothing" (the bindings that apply to a resource are the ones
// Kafka's MATCH pattern filter selects).
func TestPropertyModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bindings := genBindings(t, "bindings")
		cfg := genConfig(t)
		a := NewAuthorizer(mustSet(t, bindings...), cfg)
		for _, r := range allRequests() {
			d := a.Decide(r.principal, r.host, r.op, r.rt, r.name)
			if want := modelAuthorize(bindings, cfg, r); d.Allowed != want {
				t.Fatalf("Decide(%+v) = %v by %v, model says %v", r, d.Allowed, d.Rule, want)
			}
			if d.Rule == RuleSuperUser {
				continue
			}
			match := Filter{ResourceType: r.rt, Name: &r.name, PatternType: PatternMatch, Operation: OperationAny, Permission: PermissionAny}
			if none := len(a.Set().Matching(match)) == 0; none != (d.Rule == RuleNoACLFound) {
				t.Fatalf("rule %v, but the MATCH filter selects %v", d.Rule, a.Set().Matching(match))
			}
		}
	})
}

// allRequests is every request of the universe: 3 principals x 5 hosts x
// 14 operations x 3 types x 12 names.
func allRequests() []request {
	var out []request
	for _, p := range []string{alice, bob, "Group:*"} {
		for _, h := range genAddrs {
			for op := OperationAll; op <= OperationDescribeTokens; op++ {
				for _, rt := range genTypes {
					for _, name := range genReqNames {
						out = append(out, request{p, h, op, rt, name})
					}
				}
			}
		}
	}
	return out
}

// TestPropertyDenyNeverAllows: adding a DENY never turns a denied request
// allowed, for Authorize and AuthorizeByResourceType.
func TestPropertyDenyNeverAllows(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bindings := genBindings(t, "bindings")
		extra := genBinding(t)
		extra.Entry.Permission = PermissionDeny
		cfg := genConfig(t)
		r := genRequest(t)
		before := NewAuthorizer(mustSet(t, bindings...), cfg)
		after := NewAuthorizer(mustSet(t, append(bindings, extra)...), cfg)
		if !before.Authorize(r.principal, r.host, r.op, r.rt, r.name) && after.Authorize(r.principal, r.host, r.op, r.rt, r.name) {
			t.Fatalf("adding %v allowed %+v", extra, r)
		}
		if !before.AuthorizeByResourceType(r.principal, r.host, r.op, r.rt) && after.AuthorizeByResourceType(r.principal, r.host, r.op, r.rt) {
			t.Fatalf("adding %v allowed %+v by resource type", extra, r)
		}
	})
}

// TestPropertyAllowNeverDenies: adding an ALLOW never turns an allowed
// request denied, when allow.everyone.if.no.acl.found is off. (With it on
// the first binding on a resource takes the default away:
// TestAuthorizeAllowCanDeny.)
func TestPropertyAllowNeverDenies(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bindings := genBindings(t, "bindings")
		extra := genBinding(t)
		extra.Entry.Permission = PermissionAllow
		cfg := genConfig(t)
		cfg.AllowEveryoneIfNoACLFound = false
		r := genRequest(t)
		before := NewAuthorizer(mustSet(t, bindings...), cfg)
		after := NewAuthorizer(mustSet(t, append(bindings, extra)...), cfg)
		if before.Authorize(r.principal, r.host, r.op, r.rt, r.name) && !after.Authorize(r.principal, r.host, r.op, r.rt, r.name) {
			t.Fatalf("adding %v denied %+v", extra, r)
		}
		if before.AuthorizeByResourceType(r.principal, r.host, r.op, r.rt) && !after.AuthorizeByResourceType(r.principal, r.host, r.op, r.rt) {
			t.Fatalf("adding %v denied %+v by resource type", extra, r)
		}
	})
}

// TestPropertySuperUsersPass: whatever the bindings.
func TestPropertySuperUsersPass(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bindings := genBindings(t, "bindings")
		r := genRequest(t)
		a := NewAuthorizer(mustSet(t, bindings...), Config{SuperUsers: []string{r.principal}})
		if !a.Authorize(r.principal, r.host, r.op, r.rt, r.name) || !a.AuthorizeByResourceType(r.principal, r.host, r.op, r.rt) {
			t.Fatalf("super user %s denied %+v", r.principal, r)
		}
	})
}

// TestPropertyFilterFor: the filter made from a binding selects it and
// nothing else, so DeleteAcls with it removes exactly that binding.
func TestPropertyFilterFor(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bindings := genBindings(t, "bindings")
		x := genBinding(t)
		s := mustSet(t, append(bindings, x)...)
		f := FilterFor(x)
		if err := ValidateFilter(f); err != nil {
			t.Fatal(err)
		}
		if got := s.Matching(f); len(got) != 1 || got[0] != x {
			t.Fatalf("Matching(FilterFor(%v)) = %v", x, got)
		}
	})
}

func genFilter(t *rapid.T) Filter {
	str := func(gen *rapid.Generator[string], label string) *string {
		return rapid.Ptr(gen, true).Draw(t, label)
	}
	return Filter{
		ResourceType: rapid.SampledFrom(append([]ResourceType{ResourceAny}, genTypes...)).Draw(t, "fType"),
		Name:         str(rapid.SampledFrom(genReqNames), "fName"),
		PatternType:  rapid.SampledFrom([]PatternType{PatternAny, PatternMatch, PatternLiteral, PatternPrefixed}).Draw(t, "fPattern"),
		Principal:    str(rapid.SampledFrom(genPrincipals), "fPrincipal"),
		Host:         str(rapid.SampledFrom(genHosts), "fHost"),
		Operation:    rapid.SampledFrom([]Operation{OperationAny, OperationAll, OperationRead, OperationDescribe}).Draw(t, "fOp"),
		Permission:   rapid.SampledFrom([]Permission{PermissionAny, PermissionAllow, PermissionDeny}).Draw(t, "fPermission"),
	}
}

// TestPropertyMatching: Set.Matching, with its lookups, selects what
// Filter.Matches over every binding selects, in Bindings' order.
func TestPropertyMatching(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := mustSet(t, genBindings(t, "bindings")...)
		f := genFilter(t)
		var want []Binding
		for _, b := range s.Bindings() {
			if f.Matches(b) {
				want = append(want, b)
			}
		}
		if got := s.Matching(f); !slices.Equal(got, want) {
			t.Fatalf("Matching(%+v) =\n%v\nwant\n%v", f, got, want)
		}
	})
}

// TestPropertyBuilder: a random sequence of adds and removes, in batches,
// leaves each Set equal to a plain map of bindings, and every earlier Set
// as it was (copy on write).
func TestPropertyBuilder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var (
			s         *Set
			model     = map[Binding]bool{}
			snapshots []*Set
			contents  [][]Binding
		)
		for batch := rapid.IntRange(1, 5).Draw(t, "batches"); batch > 0; batch-- {
			b := s.Builder()
			for n := rapid.IntRange(0, 8).Draw(t, "changes"); n > 0; n-- {
				x := genBinding(t)
				if rapid.Bool().Draw(t, "remove") {
					if got := b.Remove(x); got != model[x] {
						t.Fatalf("Remove(%v) = %v, model has it: %v", x, got, model[x])
					}
					delete(model, x)
				} else {
					added, err := b.Add(x)
					if err != nil || added == model[x] {
						t.Fatalf("Add(%v) = %v, %v; model has it: %v", x, added, err, model[x])
					}
					model[x] = true
				}
			}
			s = b.Set()
			var want []Binding
			for x := range model {
				want = append(want, x)
			}
			slices.SortFunc(want, cmpBinding)
			if got := s.Bindings(); !slices.Equal(got, want) || s.Len() != len(want) {
				t.Fatalf("set (len %d) =\n%v\nmodel\n%v", s.Len(), got, want)
			}
			for _, x := range want {
				if !s.Contains(x) {
					t.Fatalf("Contains(%v) = false", x)
				}
			}
			snapshots, contents = append(snapshots, s), append(contents, want)
		}
		for i, old := range snapshots {
			if got := old.Bindings(); !slices.Equal(got, contents[i]) {
				t.Fatalf("snapshot %d changed:\n%v\nwas\n%v", i, got, contents[i])
			}
		}
	})
}
