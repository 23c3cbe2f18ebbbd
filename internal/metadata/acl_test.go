package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/fjordmq/fjord/internal/acl"
)

// equalImages reports whether a and b hold the same metadata: every
// field as reflect.DeepEqual has it, but ACLs by their bindings (and
// both nil or neither). An acl.Set's index is internal/acl's business,
// and two Sets with the same bindings may differ inside: a resource type
// whose PREFIXED patterns were all removed keeps an empty sorted slice
// of them where a Set built afresh has none. Nothing but tests compares
// images whole.
func equalImages(a, b *Image) bool {
	if a == nil || b == nil {
		return a == b
	}
	if (a.ACLs == nil) != (b.ACLs == nil) || !slices.Equal(a.ACLs.Bindings(), b.ACLs.Bindings()) {
		return false
	}
	ca, cb := *a, *b
	ca.ACLs, cb.ACLs = nil, nil
	return reflect.DeepEqual(&ca, &cb)
}

// aclBase is a log at ACLMetadataVersion without bindings.
func aclBase(t interface {
	Helper()
	Fatal(...any)
}) *Image {
	t.Helper()
	img, err := Empty(testConfigs).Apply(1, ClusterIDRecord{ClusterID: "c"}, MetadataVersionRecord{Version: ACLMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// binding is an ALLOW binding for principal from any host.
func binding(rt acl.ResourceType, pt acl.PatternType, name, principal string, op acl.Operation) acl.Binding {
	return acl.Binding{
		Pattern: acl.ResourcePattern{Type: rt, Name: name, PatternType: pt},
		Entry:   acl.Entry{Principal: principal, Host: acl.WildcardHost, Operation: op, Permission: acl.PermissionAllow},
	}
}

var (
	aliceReadsOrders = binding(acl.ResourceTopic, acl.PatternLiteral, "orders", "User:alice", acl.OperationRead)
	bobWritesOrd     = binding(acl.ResourceTopic, acl.PatternPrefixed, "ord", "User:bob", acl.OperationWrite)
	carolInGroups    = binding(acl.ResourceGroup, acl.PatternLiteral, "*", "User:carol", acl.OperationAll)
	denyMalloryHost  = acl.Binding{
		Pattern: acl.ResourcePattern{Type: acl.ResourceCluster, Name: acl.ClusterName, PatternType: acl.PatternLiteral},
		Entry:   acl.Entry{Principal: "User:mallory", Host: "10.0.0.9", Operation: acl.OperationAlter, Permission: acl.PermissionDeny},
	}
)

// A record carries a binding field for field, and back.
func TestACLRecordBinding(t *testing.T) {
	for _, b := range []acl.Binding{aliceReadsOrders, bobWritesOrd, carolInGroups, denyMalloryHost} {
		r := NewACLRecord(b)
		if got := r.Binding(); got != b {
			t.Errorf("NewACLRecord(%s).Binding() = %s", b, got)
		}
		if got := NewRemoveACLRecord(b).Binding(); got != b {
			t.Errorf("NewRemoveACLRecord(%s).Binding() = %s", b, got)
		}
	}
	r := NewACLRecord(denyMalloryHost)
	want := ACLRecord{ResourceType: 4, ResourceName: "kafka-cluster", PatternType: 3, Principal: "User:mallory", Host: "10.0.0.9", Operation: 7, Permission: 2}
	if r != want {
		t.Fatalf("NewACLRecord = %+v, want Kafka's codes %+v", r, want)
	}
}

// Reference: Kafka's AclControlManager (replay of
// AccessControlEntryRecord and RemoveAccessControlEntryRecord). From
// metadata version 11 bindings are added and removed, by value and by
// pointer; the image before is untouched; the Set is nil when empty; a
// snapshot keeps them; a record no controller writes is refused and a
// batch is applied whole or not at all.
func TestApplyACL(t *testing.T) {
	older, err := Empty(testConfigs).Apply(1, ClusterIDRecord{ClusterID: "c"}, MetadataVersionRecord{Version: ScramMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Record{NewACLRecord(aliceReadsOrders), NewRemoveACLRecord(aliceReadsOrders)} {
		if _, err := older.Apply(2, r); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 11") {
			t.Fatalf("%T in a version-10 log: %v, want ErrBadRecord naming version 11", r, err)
		}
	}

	base := aclBase(t)
	rec := NewACLRecord(bobWritesOrd)
	img, err := base.Apply(2, NewACLRecord(aliceReadsOrders), &rec, NewACLRecord(carolInGroups), NewACLRecord(denyMalloryHost))
	if err != nil {
		t.Fatal(err)
	}
	if img.ACLs.Len() != 4 {
		t.Fatalf("%d bindings after adding 4", img.ACLs.Len())
	}
	for _, b := range []acl.Binding{aliceReadsOrders, bobWritesOrd, carolInGroups, denyMalloryHost} {
		if !img.ACLs.Contains(b) {
			t.Errorf("image lacks %s", b)
		}
	}
	if base.ACLs != nil {
		t.Fatal("applying changed the image before")
	}
	// The image authorizes by them: the point of having them.
	a := acl.NewAuthorizer(img.ACLs, acl.Config{})
	if !a.Authorize("User:bob", netip.MustParseAddr("10.1.1.1"), acl.OperationWrite, acl.ResourceTopic, "orders-eu") ||
		a.Authorize("User:alice", netip.MustParseAddr("10.1.1.1"), acl.OperationWrite, acl.ResourceTopic, "orders") {
		t.Fatal("the image's bindings do not decide as added")
	}

	_, b := roundTrip(t, img)
	if !bytes.Contains(b, []byte(`"acls":[`)) {
		t.Fatalf("snapshot lacks the bindings: %s", b)
	}
	if eb, _ := EncodeImage(base); bytes.Contains(eb, []byte(`"acls"`)) {
		t.Fatalf("a snapshot without bindings names them: %s", eb)
	}

	removed, err := img.Apply(3, NewRemoveACLRecord(aliceReadsOrders), &RemoveACLRecord{ResourceType: 2, ResourceName: "ord", PatternType: 4, Principal: "User:bob", Host: "*", Operation: 4, Permission: 3})
	if err != nil {
		t.Fatal(err)
	}
	if removed.ACLs.Len() != 2 || removed.ACLs.Contains(aliceReadsOrders) || removed.ACLs.Contains(bobWritesOrd) {
		t.Fatalf("after removing two: %v", removed.ACLs.Bindings())
	}
	if img.ACLs.Len() != 4 || !img.ACLs.Contains(aliceReadsOrders) {
		t.Fatal("removing changed the image before")
	}
	roundTrip(t, removed)
	none, err := removed.Apply(4, NewRemoveACLRecord(carolInGroups), NewRemoveACLRecord(denyMalloryHost))
	if err != nil {
		t.Fatal(err)
	}
	if none.ACLs != nil {
		t.Fatalf("an image without bindings keeps a Set: %v", none.ACLs.Bindings())
	}
	if !reflect.DeepEqual(none, func() *Image { c := *base; c.Offset = 4; return &c }()) {
		t.Fatal("adding and removing every binding does not give back the image without them")
	}

	bad := func(change func(*ACLRecord)) ACLRecord {
		r := NewACLRecord(binding(acl.ResourceTopic, acl.PatternLiteral, "t", "User:dave", acl.OperationRead))
		change(&r)
		return r
	}
	huge := strings.Repeat("n", 1<<20)
	for _, c := range []struct {
		rec Record
		msg string
	}{
		{NewACLRecord(aliceReadsOrders), "exists already"},
		{NewRemoveACLRecord(binding(acl.ResourceTopic, acl.PatternLiteral, "orders", "User:alice", acl.OperationWrite)), "does not exist"},
		{bad(func(r *ACLRecord) { r.ResourceType = int8(acl.ResourceAny) }), "invalid resource type"},
		{bad(func(r *ACLRecord) { r.ResourceType = 0 }), "invalid resource type"},
		{bad(func(r *ACLRecord) { r.ResourceType = 42 }), "invalid resource type"},
		{bad(func(r *ACLRecord) { r.PatternType = int8(acl.PatternMatch) }), "invalid pattern type"},
		{bad(func(r *ACLRecord) { r.PatternType = int8(acl.PatternAny) }), "invalid pattern type"},
		{bad(func(r *ACLRecord) { r.Operation = int8(acl.OperationAny) }), "invalid operation"},
		{bad(func(r *ACLRecord) { r.Operation = -5 }), "invalid operation"},
		{bad(func(r *ACLRecord) { r.Permission = int8(acl.PermissionAny) }), "invalid permission"},
		{bad(func(r *ACLRecord) { r.ResourceName = "" }), "empty resource name"},
		{bad(func(r *ACLRecord) { r.ResourceType, r.ResourceName = int8(acl.ResourceCluster), "*" }), "CLUSTER"},
		{bad(func(r *ACLRecord) { r.Principal = "alice" }), "invalid principal"},
		{bad(func(r *ACLRecord) { r.Host = "example.com" }), "invalid host"},
		{bad(func(r *ACLRecord) { r.ResourceName = huge }), "too long"},
		{bad(func(r *ACLRecord) { r.Principal = "User:\xff" }), "UTF-8"},
		{(*ACLRecord)(nil), "nil"},
		{(*RemoveACLRecord)(nil), "nil"},
	} {
		_, err := img.Apply(5, c.rec)
		if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%.80v: %v, want ErrBadRecord saying %q", c.rec, err, c.msg)
		}
		if err != nil && len(err.Error()) > 1000 {
			t.Errorf("an error of %d bytes quotes the record", len(err.Error()))
		}
	}
	// A batch is applied whole or not at all, and sees its own records:
	// a second add of a binding it added is refused, a removal of one it
	// added is not.
	dave := binding(acl.ResourceTopic, acl.PatternLiteral, "t", "User:dave", acl.OperationRead)
	if _, err := img.Apply(5, NewACLRecord(dave), NewACLRecord(dave)); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "record 1") {
		t.Fatalf("a binding added twice in one batch: %v", err)
	}
	if img.ACLs.Contains(dave) {
		t.Fatal("a refused batch changed the image")
	}
	next, err := img.Apply(5, NewACLRecord(dave), NewRemoveACLRecord(dave), NewRemoveACLRecord(aliceReadsOrders), NewACLRecord(aliceReadsOrders))
	if err != nil || next.ACLs.Len() != 4 || next.ACLs.Contains(dave) {
		t.Fatalf("add and remove in one batch: %v, %v", err, next)
	}
}

// Both record kinds encode and decode as the others do, by value and by
// pointer, with the wire's codes as numbers.
func TestEncodeDecodeACLRecords(t *testing.T) {
	for _, r := range []Record{NewACLRecord(denyMalloryHost), NewRemoveACLRecord(bobWritesOrd)} {
		b, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip of %s: %v, %v", b, got, err)
		}
		var pb []byte
		switch v := r.(type) {
		case ACLRecord:
			pb, err = Encode(&v)
		case RemoveACLRecord:
			pb, err = Encode(&v)
		}
		if err != nil || !bytes.Equal(pb, b) {
			t.Fatalf("Encode(&%T) = %s, %v; want %s", r, pb, err, b)
		}
	}
	b, _ := Encode(NewRemoveACLRecord(bobWritesOrd))
	want := `{"type":"remove_acl","data":{"resource_type":2,"resource_name":"ord","pattern_type":4,"principal":"User:bob","host":"*","operation":4,"permission":3}}`
	if string(b) != want {
		t.Fatalf("Encode = %s\nwant     %s", b, want)
	}
	// A code no Kafka knows decodes as the number it was: Apply, not the
	// decoder, refuses it.
	got, err := Decode([]byte(`{"type":"acl","data":{"resource_type":99,"resource_name":"x","pattern_type":3,"principal":"User:a","host":"*","operation":3,"permission":3}}`))
	if err != nil || got.(ACLRecord).ResourceType != 99 {
		t.Fatalf("decoding an unknown code: %v, %v", got, err)
	}
	for _, in := range []string{
		`{"type":"acl","data":{"resource_type":300}}`,
		`{"type":"acl","data":{"resource_type":"TOPIC"}}`,
		`{"type":"remove_acl"}`,
	} {
		if _, err := Decode([]byte(in)); !errors.Is(err, ErrDecode) {
			t.Errorf("Decode(%s) = %v, want ErrDecode", in, err)
		}
	}
}

// Copy-on-write: images applied from the same one, and the one before,
// each keep exactly their own bindings, however the batches after touch
// the same resource types and patterns.
func TestACLImagesCopyOnWrite(t *testing.T) {
	img, err := aclBase(t).Apply(2, NewACLRecord(aliceReadsOrders), NewACLRecord(bobWritesOrd), NewACLRecord(carolInGroups))
	if err != nil {
		t.Fatal(err)
	}
	before := img.ACLs.Bindings()
	sameBucket := aliceReadsOrders
	sameBucket.Entry.Principal = "User:zed"
	left, err := img.Apply(3, NewACLRecord(sameBucket), NewRemoveACLRecord(bobWritesOrd))
	if err != nil {
		t.Fatal(err)
	}
	right, err := img.Apply(3, NewRemoveACLRecord(aliceReadsOrders), NewACLRecord(binding(acl.ResourceTopic, acl.PatternPrefixed, "o", "User:bob", acl.OperationRead)))
	if err != nil {
		t.Fatal(err)
	}
	if got := img.ACLs.Bindings(); !slices.Equal(got, before) {
		t.Fatalf("the image before now holds %v, had %v", got, before)
	}
	if !left.ACLs.Contains(sameBucket) || !left.ACLs.Contains(aliceReadsOrders) || left.ACLs.Contains(bobWritesOrd) || left.ACLs.Len() != 3 {
		t.Fatalf("left: %v", left.ACLs.Bindings())
	}
	if right.ACLs.Contains(sameBucket) || right.ACLs.Contains(aliceReadsOrders) || !right.ACLs.Contains(bobWritesOrd) || right.ACLs.Len() != 3 {
		t.Fatalf("right: %v", right.ACLs.Bindings())
	}
	// Each decides by its own: in the image before bob writes "ord..."
	// topics and zed reads nothing.
	host := netip.MustParseAddr("10.0.0.1")
	for _, c := range []struct {
		img       *Image
		principal string
		op        acl.Operation
		topic     string
		want      bool
	}{
		{img, "User:bob", acl.OperationWrite, "orders", true},
		{img, "User:zed", acl.OperationRead, "orders", false},
		{left, "User:zed", acl.OperationRead, "orders", true},
		{left, "User:bob", acl.OperationWrite, "orders", false},
		{right, "User:alice", acl.OperationRead, "orders", false},
		{right, "User:bob", acl.OperationRead, "orders", true},
	} {
		if got := acl.NewAuthorizer(c.img.ACLs, acl.Config{}).Authorize(c.principal, host, c.op, acl.ResourceTopic, c.topic); got != c.want {
			t.Errorf("image at %d: %s %s %s = %v, want %v", c.img.Offset, c.principal, c.op, c.topic, got, c.want)
		}
	}
}

// An image whose bindings went through any history equals its own
// snapshot: here a type that had PREFIXED patterns and has none left.
func TestACLSnapshotAfterHistory(t *testing.T) {
	img, err := aclBase(t).Apply(2, NewACLRecord(aliceReadsOrders), NewACLRecord(bobWritesOrd))
	if err != nil {
		t.Fatal(err)
	}
	img, err = img.Apply(3, NewRemoveACLRecord(bobWritesOrd))
	if err != nil {
		t.Fatal(err)
	}
	got, b := roundTrip(t, img)
	again, err := EncodeImage(got)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encoding differs: %v\n%s\n%s", err, b, again)
	}
}

// The bindings are bounded, in one batch as across batches; a removal
// makes room again.
func TestACLsBounded(t *testing.T) {
	recs := make([]Record, 0, MaxACLs)
	for i := range MaxACLs {
		recs = append(recs, NewACLRecord(binding(acl.ResourceTopic, acl.PatternLiteral, fmt.Sprintf("t%d", i%1000), fmt.Sprintf("User:u%d", i/1000), acl.OperationRead)))
	}
	full, err := aclBase(t).Apply(2, recs...)
	if err != nil {
		t.Fatal(err)
	}
	if full.ACLs.Len() != MaxACLs {
		t.Fatalf("%d bindings, want %d", full.ACLs.Len(), MaxACLs)
	}
	extra := NewACLRecord(binding(acl.ResourceTopic, acl.PatternLiteral, "one-more", "User:x", acl.OperationRead))
	if _, err := full.Apply(3, extra); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "at most 100000") {
		t.Fatalf("one binding past the bound: %v", err)
	}
	if _, err := full.Apply(3, RemoveACLRecord(recs[7].(ACLRecord)), extra); err != nil {
		t.Fatalf("a binding in place of a removed one: %v", err)
	}
	if _, err := aclBase(t).Apply(2, append(recs[:len(recs):len(recs)], extra)...); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "at most 100000") {
		t.Fatalf("a batch past the bound: %v", err)
	}
}

// TestACLProperties: on random batches of adds and removes over a few
// bindings (some invalid, several sharing a resource type, pattern or
// name), Apply never panics; a refused batch wraps ErrBadRecord and
// leaves the image as it was; an accepted one holds exactly the bindings
// a plain set model holds (nil when none); the image before keeps its
// own; and every image equals its snapshot.
func TestACLProperties(t *testing.T) {
	universe := []acl.Binding{
		aliceReadsOrders, bobWritesOrd, carolInGroups, denyMalloryHost,
		binding(acl.ResourceTopic, acl.PatternPrefixed, "orders", "User:alice", acl.OperationRead),
		binding(acl.ResourceTopic, acl.PatternLiteral, "orders", "User:bob", acl.OperationRead),
		binding(acl.ResourceTopic, acl.PatternPrefixed, "", "User:*", acl.OperationDescribe),
		binding(acl.ResourceTopic, acl.PatternLiteral, "*", "User:*", acl.OperationAll),
		// Invalid: refused whatever the image.
		binding(acl.ResourceAny, acl.PatternLiteral, "x", "User:a", acl.OperationRead),
		binding(acl.ResourceTopic, acl.PatternLiteral, "", "User:a", acl.OperationRead),
	}
	rapid.Check(t, func(t *rapid.T) {
		img := aclBase(t)
		model := map[acl.Binding]bool{}
		for batch := range rapid.IntRange(1, 20).Draw(t, "batches") {
			next := map[acl.Binding]bool{}
			for b := range model {
				next[b] = true
			}
			var recs []Record
			valid := true
			for range rapid.IntRange(1, 4).Draw(t, "records") {
				b := rapid.SampledFrom(universe).Draw(t, "binding")
				if rapid.Bool().Draw(t, "remove") {
					recs = append(recs, NewRemoveACLRecord(b))
					valid = valid && next[b]
					delete(next, b)
					continue
				}
				recs = append(recs, NewACLRecord(b))
				valid = valid && acl.Validate(b) == nil && !next[b]
				next[b] = true
			}
			before := img.ACLs.Bindings()
			got, err := img.Apply(uint64(batch)+2, recs...)
			if !slices.Equal(img.ACLs.Bindings(), before) {
				t.Fatalf("Apply changed the image before")
			}
			if (err == nil) != valid {
				t.Fatalf("%v: error %v, the model says valid=%v", recs, err, valid)
			}
			if err != nil {
				if !errors.Is(err, ErrBadRecord) {
					t.Fatalf("error %v does not wrap ErrBadRecord", err)
				}
				continue
			}
			model, img = next, got
			if (len(model) == 0) != (img.ACLs == nil) || img.ACLs.Len() != len(model) {
				t.Fatalf("image holds %v, the model %v", img.ACLs.Bindings(), model)
			}
			for b := range model {
				if !img.ACLs.Contains(b) {
					t.Fatalf("image lacks %s", b)
				}
			}
			checkSnapshot(t, img)
		}
	})
}

// FuzzACLRecord feeds arbitrary fields to an ACLRecord. Invariants:
// Apply never panics; it accepts the record exactly when acl.Validate
// accepts its binding (refusing with ErrBadRecord otherwise); an
// accepted binding is in the image, survives
// Encode/Decode and a snapshot, and its removal leaves no Set behind.
func FuzzACLRecord(f *testing.F) {
	for _, b := range []acl.Binding{aliceReadsOrders, bobWritesOrd, carolInGroups, denyMalloryHost} {
		r := NewACLRecord(b)
		f.Add(r.ResourceType, r.ResourceName, r.PatternType, r.Principal, r.Host, r.Operation, r.Permission)
	}
	f.Add(int8(0), "", int8(0), "", "", int8(0), int8(0))
	f.Add(int8(-1), strings.Repeat("n", acl.MaxNameBytes+1), int8(127), "User:"+strings.Repeat("p", acl.MaxPrincipalBytes), strings.Repeat("h", acl.MaxHostBytes+1), int8(-128), int8(4))
	f.Add(int8(2), strings.Repeat("n", acl.MaxNameBytes), int8(4), "User:\xff", "::ffff:10.0.0.1", int8(14), int8(2))
	f.Add(int8(2), "t", int8(3), "User:a", "fe80::1%eth0", int8(2), int8(3))
	img := aclBase(f)
	f.Fuzz(func(t *testing.T, rt int8, name string, pt int8, principal, host string, op, perm int8) {
		r := ACLRecord{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: host, Operation: op, Permission: perm}
		want := acl.Validate(r.Binding()) == nil
		next, err := img.Apply(2, r)
		if (err == nil) != want {
			t.Fatalf("Apply: %v; acl.Validate says valid=%v", err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %.200v does not wrap ErrBadRecord", err)
			}
			return
		}
		if !next.ACLs.Contains(r.Binding()) || next.ACLs.Len() != 1 {
			t.Fatalf("image holds %v", next.ACLs.Bindings())
		}
		b, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := Decode(b); err != nil || back != Record(r) {
			t.Fatalf("record round trip: %v, %v", back, err)
		}
		snap, err := EncodeImage(next)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeImage(snap, testConfigs); err != nil || !equalImages(back, next) {
			t.Fatalf("snapshot round trip: %v", err)
		}
		gone, err := next.Apply(3, RemoveACLRecord(r))
		if err != nil || gone.ACLs != nil {
			t.Fatalf("removal: %v, left %v", err, gone.ACLs.Bindings())
		}
	})
}
