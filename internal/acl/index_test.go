package acl

import (
	"errors"
	"slices"
	"testing"
)

// TestBuilderAddRemove: bindings are unique by value (Kafka's
// AclControlManager.existingAcls); Add reports a new one, Remove an
// existing one.
func TestBuilderAddRemove(t *testing.T) {
	x := allow(literal(ResourceTopic, "foo"), alice, star, OperationRead)
	y := deny(prefixed(ResourceTopic, "fo"), bob, "10.0.0.2", OperationWrite)
	b := (*Set)(nil).Builder()
	if added, err := b.Add(x); !added || err != nil {
		t.Fatalf("Add(x) = %v, %v", added, err)
	}
	// Kafka answers success for an ACL that exists and writes nothing.
	if added, err := b.Add(x); added || err != nil {
		t.Fatalf("second Add(x) = %v, %v", added, err)
	}
	if _, err := b.Add(y); err != nil {
		t.Fatal(err)
	}
	// A binding Validate refuses never enters a Set.
	if _, err := b.Add(allow(literal(ResourceAny, "foo"), alice, star, OperationRead)); !errors.Is(err, ErrInvalidResourceType) {
		t.Fatalf("Add(invalid) = %v", err)
	}
	if b.Remove(allow(literal(ResourceTopic, "bar"), alice, star, OperationRead)) {
		t.Fatal("removed a binding that is not there")
	}
	s := b.Set()
	if s.Len() != 2 || !s.Contains(x) || !s.Contains(y) {
		t.Fatalf("set = %v", s.Bindings())
	}
	b = s.Builder()
	if !b.Remove(x) || b.Remove(x) {
		t.Fatal("Remove(x) twice did not answer true then false")
	}
	s2 := b.Set()
	if s2.Len() != 1 || s2.Contains(x) || !s2.Contains(y) {
		t.Fatalf("after remove: %v", s2.Bindings())
	}
	// Copy on write: the old Set is unchanged.
	if s.Len() != 2 || !s.Contains(x) {
		t.Fatalf("old set changed: %v", s.Bindings())
	}
}

// TestBuilderSpent: a Builder's maps belong to the Set it made.
func TestBuilderSpent(t *testing.T) {
	b := (*Set)(nil).Builder()
	b.Set()
	defer func() {
		if recover() == nil {
			t.Fatal("Add after Set did not panic")
		}
	}()
	b.Add(allow(literal(ResourceTopic, "foo"), alice, star, OperationRead))
}

// TestSetCopyOnWrite: changes through a Builder, literal and prefixed,
// never show in the Set it started from, which keeps authorizing as before.
func TestSetCopyOnWrite(t *testing.T) {
	base := mustSet(t,
		allow(literal(ResourceTopic, "foo"), alice, star, OperationRead),
		allow(prefixed(ResourceTopic, "fo"), bob, star, OperationRead),
		allow(literal(ResourceGroup, "g"), alice, star, OperationRead),
	)
	before := base.Bindings()
	b := base.Builder()
	b.Add(deny(literal(ResourceTopic, "foo"), alice, star, OperationRead))
	b.Add(deny(prefixed(ResourceTopic, "f"), bob, star, OperationRead))
	b.Remove(allow(prefixed(ResourceTopic, "fo"), bob, star, OperationRead))
	next := b.Set()
	if !slices.Equal(base.Bindings(), before) {
		t.Fatalf("base changed:\n%v\nwas\n%v", base.Bindings(), before)
	}
	old, cur := NewAuthorizer(base, Config{}), NewAuthorizer(next, Config{})
	if !old.Authorize(alice, host1, OperationRead, ResourceTopic, "foo") || !old.Authorize(bob, host1, OperationRead, ResourceTopic, "fox") {
		t.Fatal("base set lost its allows")
	}
	if cur.Authorize(alice, host1, OperationRead, ResourceTopic, "foo") || cur.Authorize(bob, host1, OperationRead, ResourceTopic, "fox") {
		t.Fatal("new set missed its denies")
	}
	// The untouched type is shared, not copied.
	if base.types[ResourceGroup] != next.types[ResourceGroup] {
		t.Fatal("an untouched resource type was copied")
	}
}

// TestSetEmptiesType: removing a type's last binding leaves no index for
// it, so "no ACL found" holds again.
func TestSetEmptiesType(t *testing.T) {
	x := allow(prefixed(ResourceTopic, "fo"), bob, star, OperationRead)
	b := mustSet(t, x).Builder()
	b.Remove(x)
	s := b.Set()
	if s.Len() != 0 || s.types[ResourceTopic] != nil {
		t.Fatalf("empty set still indexes topics: %+v", s.types[ResourceTopic])
	}
	if !NewAuthorizer(s, Config{AllowEveryoneIfNoACLFound: true}).Authorize(alice, host1, OperationRead, ResourceTopic, "foo") {
		t.Fatal("no ACL found after removing the last one, but denied")
	}
}

func TestNewSetRefusesInvalid(t *testing.T) {
	if _, err := NewSet([]Binding{allow(literal(ResourceTopic, "foo"), "alice", star, OperationRead)}); !errors.Is(err, ErrInvalidPrincipal) {
		t.Fatalf("NewSet = %v", err)
	}
}

// TestBindingsOrder: by resource type, pattern type, name, then entry.
func TestBindingsOrder(t *testing.T) {
	in := []Binding{
		allow(literal(ResourceGroup, "a"), alice, star, OperationRead),
		allow(prefixed(ResourceTopic, "a"), alice, star, OperationRead),
		allow(literal(ResourceTopic, "b"), bob, star, OperationRead),
		allow(literal(ResourceTopic, "b"), alice, star, OperationWrite),
		allow(literal(ResourceTopic, "a"), alice, star, OperationRead),
	}
	want := []Binding{in[4], in[3], in[2], in[1], in[0]}
	if got := mustSet(t, in...).Bindings(); !slices.Equal(got, want) {
		t.Fatalf("Bindings =\n%v\nwant\n%v", got, want)
	}
}

// TestPrefixCursor: every stored prefix of a name is found once, longest
// first, across the jumps where the name leaves the sorted prefixes.
func TestPrefixCursor(t *testing.T) {
	var bs []Binding
	for _, p := range []string{"f", "fa", "fb", "foo", "foob", "fooba", "foobar", "foobarbaz", "fox", "g", "*", "a"} {
		bs = append(bs, allow(prefixed(ResourceTopic, p), alice, star, OperationRead))
	}
	s := mustSet(t, bs...)
	for name, want := range map[string][]string{
		"foobar":  {"foobar", "fooba", "foob", "foo", "f"},
		"foobaz":  {"fooba", "foob", "foo", "f"},
		"fa":      {"fa", "f"},
		"fz":      {"f"},
		"e":       nil,
		"zzz":     nil,
		"*topic":  {"*"},
		"fooxbar": {"foo", "f"},
	} {
		var got []string
		for c := s.types[ResourceTopic].prefixesOf(name); ; {
			bk := c.next()
			if bk == nil {
				break
			}
			got = append(got, bk.pattern.Name)
		}
		if !slices.Equal(got, want) {
			t.Errorf("prefixes of %q = %q, want %q", name, got, want)
		}
	}
}
