package acl

import (
	"fmt"
	"testing"
)

// benchBindings is 10,000 bindings shaped like a multi-tenant cluster:
//
//	4,000 LITERAL topic ALLOWs   orders-0000..1999, READ and WRITE, one service each
//	3,000 PREFIXED topic ALLOWs  300 teams x 10 principals: team-NNN-, and
//	                             nested team-NNN-app-M- (4 levels deep)
//	1,000 LITERAL topic DENYs    orders-2000..2999 for the services
//	1,000 group ALLOWs           half LITERAL, half PREFIXED
//	  999 transactional id ALLOWs, PREFIXED
//	    1 wildcard ALLOW         DESCRIBE on every topic for User:monitor
func benchBindings() []Binding {
	var bs []Binding
	add := func(b Binding) { bs = append(bs, b) }
	for i := 0; i < 2000; i++ {
		svc := fmt.Sprintf("User:svc-%04d", i)
		add(allow(literal(ResourceTopic, fmt.Sprintf("orders-%04d", i)), svc, star, OperationRead))
		add(allow(literal(ResourceTopic, fmt.Sprintf("orders-%04d", i)), svc, star, OperationWrite))
	}
	for team := 0; team < 300; team++ {
		prefixes := []string{
			fmt.Sprintf("team-%03d-", team),
			fmt.Sprintf("team-%03d-app-%d-", team, team%7),
			fmt.Sprintf("team-%03d-app-%d-events-", team, team%7),
			fmt.Sprintf("team-%03d-app-%d-events-v2-", team, team%7),
		}
		for p := 0; p < 10; p++ {
			add(allow(prefixed(ResourceTopic, prefixes[p%len(prefixes)]), fmt.Sprintf("User:team-%03d-member-%d", team, p), star, OperationAll))
		}
	}
	for i := 2000; i < 3000; i++ {
		add(deny(literal(ResourceTopic, fmt.Sprintf("orders-%04d", i)), fmt.Sprintf("User:svc-%04d", i%2000), "10.0.0.9", OperationWrite))
	}
	for i := 0; i < 500; i++ {
		add(allow(literal(ResourceGroup, fmt.Sprintf("cg-%04d", i)), fmt.Sprintf("User:svc-%04d", i), star, OperationRead))
		add(allow(prefixed(ResourceGroup, fmt.Sprintf("team-%03d-", i%300)), fmt.Sprintf("User:team-%03d-member-%d", i%300, i%10), star, OperationRead))
	}
	for i := 0; i < 999; i++ {
		add(allow(prefixed(ResourceTransactionalID, fmt.Sprintf("tx-%03d-", i)), fmt.Sprintf("User:svc-%04d", i), star, OperationWrite))
	}
	add(allow(literal(ResourceTopic, "*"), "User:monitor", star, OperationDescribe))
	return bs
}

func benchAuthorizer(b *testing.B) *Authorizer {
	bs := benchBindings()
	if len(bs) != 10000 {
		b.Fatalf("%d bindings, want 10000", len(bs))
	}
	return NewAuthorizer(mustSet(b, bs...), Config{SuperUsers: []string{"User:admin"}})
}

// BenchmarkAuthorize is one call per partition of a request, against
// 10,000 bindings.
func BenchmarkAuthorize(b *testing.B) {
	a := benchAuthorizer(b)
	for _, c := range []struct {
		name string
		r    request
		want bool
	}{
		{"literal", request{"User:svc-0042", host1, OperationWrite, ResourceTopic, "orders-0042"}, true},
		{"prefixed-deep", request{"User:team-123-member-3", host1, OperationRead, ResourceTopic, "team-123-app-4-events-v2-clicks"}, true},
		{"implied-describe", request{"User:svc-0042", host1, OperationDescribe, ResourceTopic, "orders-0042"}, true},
		{"deny", request{"User:svc-0042", host1, OperationWrite, ResourceTopic, "orders-2042"}, false},
		{"no-match", request{"User:svc-0042", host1, OperationRead, ResourceTopic, "orders-0043"}, false},
		{"no-acl-found", request{"User:svc-0042", host1, OperationRead, ResourceTopic, "unrelated-topic"}, false},
		{"wildcard", request{"User:monitor", host1, OperationDescribe, ResourceTopic, "team-007-app-0-x"}, true},
		{"super-user", request{"User:admin", host1, OperationAlter, ResourceCluster, ClusterName}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			r := c.r
			if got := a.Authorize(r.principal, r.host, r.op, r.rt, r.name); got != c.want {
				b.Fatalf("Authorize = %v, want %v", got, c.want)
			}
			b.ReportAllocs()
			for b.Loop() {
				a.Authorize(r.principal, r.host, r.op, r.rt, r.name)
			}
		})
	}
}

func BenchmarkAuthorizeByResourceType(b *testing.B) {
	a := benchAuthorizer(b)
	b.ReportAllocs()
	for b.Loop() {
		a.AuthorizeByResourceType("User:nobody", host1, OperationWrite, ResourceTopic)
	}
}

// BenchmarkBuilder is what one CreateAcls of one binding costs a metadata
// image holding 10,000: a copy-on-write change of the TOPIC index.
func BenchmarkBuilder(b *testing.B) {
	s := benchAuthorizer(b).Set()
	b.Run("add-literal", func(b *testing.B) {
		x := allow(literal(ResourceTopic, "new-topic"), alice, star, OperationRead)
		b.ReportAllocs()
		for b.Loop() {
			bl := s.Builder()
			bl.Add(x)
			bl.Set()
		}
	})
	b.Run("add-prefixed", func(b *testing.B) {
		x := allow(prefixed(ResourceTopic, "new-"), alice, star, OperationRead)
		b.ReportAllocs()
		for b.Loop() {
			bl := s.Builder()
			bl.Add(x)
			bl.Set()
		}
	})
	b.Run("new-set-10k", func(b *testing.B) {
		bs := benchBindings()
		b.ReportAllocs()
		for b.Loop() {
			mustSet(b, bs...)
		}
	})
}

func BenchmarkMatching(b *testing.B) {
	s := benchAuthorizer(b).Set()
	name := "team-123-app-4-events-v2-clicks"
	f := Filter{ResourceType: ResourceTopic, Name: &name, PatternType: PatternMatch, Operation: OperationAny, Permission: PermissionAny}
	b.ReportAllocs()
	for b.Loop() {
		s.Matching(f)
	}
}
