package acl

import (
	"maps"
	"net/netip"
	"slices"
	"strings"
)

// Set is an immutable set of bindings, indexed for Authorize. The zero
// value and nil are the empty set. A Set is safe for concurrent use; it
// never changes once built. Builder makes the next one.
//
// Layout (one typeIndex per resource type that has bindings):
//
//	types[TOPIC] -> literal  map name -> bucket   LITERAL patterns, "*" included
//	                prefixed map name -> bucket   PREFIXED patterns
//	                prefixes []*bucket            the prefixed buckets sorted by name
//	bucket       -> pattern, entries sorted by (principal, host, operation, permission)
//
// Invariants: every binding passes Validate; a binding is in exactly one
// bucket, once; no bucket is empty; prefixes holds exactly the buckets of
// prefixed; n counts the bindings.
//
// Authorizing a name costs one map lookup for the literal name, one for
// "*", and one binary search of prefixes per PREFIXED pattern that matches
// plus one per point where the name leaves the sorted prefixes (see
// prefixCursor): never a scan of every prefixed pattern. Within a bucket,
// the entries of the caller's principal and of "User:*" are found by
// binary search, so a topic with ACLs for thousands of principals costs
// about what one with a few does.
type Set struct {
	types [numResourceTypes]*typeIndex
	n     int
}

// numResourceTypes sizes the per-type array: codes 0..USER, of which only
// the concrete TOPIC..USER are ever filled.
const numResourceTypes = int(ResourceUser) + 1

type typeIndex struct {
	literal  map[string]*bucket
	prefixed map[string]*bucket
	// prefixes: the values of prefixed, sorted by name.
	prefixes []*bucket
	n        int
}

// bucket holds the entries of one resource pattern.
type bucket struct {
	pattern ResourcePattern
	entries []entry
}

// entry is an Entry with its host parsed once, when it is added, so that
// Authorize compares addresses, not strings.
type entry struct {
	Entry
	// anyHost: Host is "*". Otherwise addr is Host parsed and unmapped
	// (an IPv4-mapped IPv6 address is its IPv4 address, as Java's
	// InetAddress makes it for a client's address).
	anyHost bool
	addr    netip.Addr
}

func newEntry(e Entry) entry {
	if e.Host == WildcardHost {
		return entry{Entry: e, anyHost: true}
	}
	// Validate accepted the host, so it parses.
	return entry{Entry: e, addr: netip.MustParseAddr(e.Host).Unmap()}
}

// NewSet builds a Set from bindings, duplicates collapsing into one. It
// refuses the first binding Validate refuses.
func NewSet(bindings []Binding) (*Set, error) {
	b := (*Set)(nil).Builder()
	for _, x := range bindings {
		if _, err := b.Add(x); err != nil {
			return nil, err
		}
	}
	return b.Set(), nil
}

// Len is the number of bindings.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// Contains reports whether b is in s.
func (s *Set) Contains(b Binding) bool {
	bk := s.bucketOf(b.Pattern)
	if bk == nil {
		return false
	}
	_, found := bk.find(b.Entry)
	return found
}

// Bindings returns every binding, in resource type, pattern type, name and
// entry order. The slice is the caller's.
func (s *Set) Bindings() []Binding {
	return s.Matching(Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OperationAny, Permission: PermissionAny})
}

// Matching returns the bindings f matches (f.Matches), sorted as
// Bindings: the answer to DescribeAcls, and the bindings a DeleteAcls
// filter removes. It looks up the buckets f can match instead of
// scanning when f names a resource type and a name.
func (s *Set) Matching(f Filter) []Binding {
	if s == nil {
		return nil
	}
	var out []Binding
	collect := func(bk *bucket) {
		if bk == nil || !f.matchesPattern(bk.pattern) {
			return
		}
		for i := range bk.entries {
			if f.matchesEntry(bk.entries[i].Entry) {
				out = append(out, Binding{Pattern: bk.pattern, Entry: bk.entries[i].Entry})
			}
		}
	}
	for rt, t := range s.types {
		if t == nil || (f.ResourceType != ResourceAny && ResourceType(rt) != f.ResourceType) {
			continue
		}
		if f.Name == nil {
			for _, bk := range t.literal {
				collect(bk)
			}
			for _, bk := range t.prefixed {
				collect(bk)
			}
			continue
		}
		name := *f.Name
		switch f.PatternType {
		case PatternLiteral:
			collect(t.literal[name])
		case PatternPrefixed:
			collect(t.prefixed[name])
		case PatternAny:
			collect(t.literal[name])
			collect(t.prefixed[name])
		case PatternMatch:
			collect(t.literal[name])
			if name != WildcardResource {
				collect(t.literal[WildcardResource])
			}
			for c := t.prefixesOf(name); ; {
				bk := c.next()
				if bk == nil {
					break
				}
				collect(bk)
			}
		}
	}
	slices.SortFunc(out, cmpBinding)
	return out
}

// typeIndex returns the index of rt, nil when there is none.
func (s *Set) typeIndex(rt ResourceType) *typeIndex {
	if s == nil || rt < 0 || int(rt) >= numResourceTypes {
		return nil
	}
	return s.types[rt]
}

func (s *Set) bucketOf(p ResourcePattern) *bucket {
	t := s.typeIndex(p.Type)
	if t == nil {
		return nil
	}
	switch p.PatternType {
	case PatternLiteral:
		return t.literal[p.Name]
	case PatternPrefixed:
		return t.prefixed[p.Name]
	}
	return nil
}

// prefixCursor walks the PREFIXED buckets whose name is a prefix of a
// resource name, longest first:
//
//	for c := t.prefixesOf(name); ; {
//		bk := c.next()
//		if bk == nil { break }
//		...
//	}
//
// prefixes is sorted, and every prefix of name sorts at or before name.
// So the largest entry <= name is the only candidate at the top; if it is
// a prefix of name we take it and continue below it, with what is left to
// find being prefixes of name shorter than it. If it is not a prefix, it
// shares some c bytes with name and sorts below name, so any prefix of
// name longer than c bytes would sort between it and name, where there is
// nothing: we continue with name[:c]. Each round moves the search strictly
// down the slice and shortens the target, so a name costs a binary search
// per matching prefix and per point where it leaves the sorted prefixes,
// at most len(name)+1 in all. This is Kafka's own walk
// (StandardAuthorizerData.findAclRule over its reverse-sorted set) done
// on a slice.
//
// A trie was the other choice: one step per byte of the name, but a node
// per byte (or per edge, radix-compressed) to allocate, copy on write, and
// chase through memory; the sorted slice is one allocation, copied whole
// when it changes. A cursor rather than a callback keeps Authorize's
// loop free of indirect calls.
type prefixCursor struct {
	ps     []*bucket
	target string
	// hi: candidates are ps[:hi]. done: the empty prefix was taken, so
	// nothing shorter is left.
	hi   int
	done bool
}

func (t *typeIndex) prefixesOf(name string) prefixCursor {
	return prefixCursor{ps: t.prefixes, target: name, hi: len(t.prefixes)}
}

// next returns the next matching bucket, nil when there is none.
func (c *prefixCursor) next() *bucket {
	for !c.done && c.hi > 0 {
		// j: the last index below hi whose name is <= target.
		lo, up := 0, c.hi
		for lo < up {
			m := int(uint(lo+up) >> 1)
			if c.ps[m].pattern.Name <= c.target {
				lo = m + 1
			} else {
				up = m
			}
		}
		j := lo - 1
		if j < 0 {
			break
		}
		c.hi = j
		bk := c.ps[j]
		pn := bk.pattern.Name
		if strings.HasPrefix(c.target, pn) {
			if pn == "" {
				c.done = true
			} else {
				c.target = c.target[:len(pn)-1]
			}
			return bk
		}
		c.target = c.target[:commonPrefixLen(c.target, pn)]
	}
	c.hi = 0
	return nil
}

func commonPrefixLen(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// find returns where e is, or would be inserted, in b's entries.
func (b *bucket) find(e Entry) (int, bool) {
	return slices.BinarySearchFunc(b.entries, e, func(x entry, e Entry) int { return cmpEntry(x.Entry, e) })
}

// firstOf returns the index of the first entry of principal (or where it
// would be).
func (b *bucket) firstOf(principal string) int {
	lo, hi := 0, len(b.entries)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if b.entries[m].Principal < principal {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Builder makes a new Set from an old one by adds and removes, copying on
// write: the new Set shares every bucket and every resource type it did
// not change with the old one, which stays valid and unchanged.
//
// Cost, for the metadata image that keeps one Set per image: changing a
// resource type copies that type's two maps (pointers only: O(patterns of
// that type)); changing a bucket copies its entries (O(bindings on that
// pattern)); changing the PREFIXED patterns of a type re-sorts its
// prefixes once, in Set (O(P log P)). With 10,000 bindings a batch of
// changes costs about a millisecond, however many changes it holds, and
// nothing for the types it does not touch. Two designs were weighed
// against it: rebuilding the whole index per change (O(n log n), every
// type, every time) and a persistent tree (O(log n) per change, but a
// pointer chase per byte on every Authorize and far more code). ACLs
// change a few times an hour and are read per partition of every request,
// so reads decide.
//
// A Builder is not safe for concurrent use, and is spent by Set.
type Builder struct {
	set Set
	// ownType[rt]: set.types[rt] was copied by this builder and may be
	// written. ownBucket likewise for buckets.
	ownType   [numResourceTypes]bool
	ownBucket map[*bucket]bool
	// resort[rt]: the PREFIXED buckets of rt changed; prefixes is rebuilt
	// in Set.
	resort [numResourceTypes]bool
	spent  bool
}

// Builder starts a new Set from s (nil: from empty).
func (s *Set) Builder() *Builder {
	b := &Builder{ownBucket: make(map[*bucket]bool)}
	if s != nil {
		b.set = *s
	}
	return b
}

// Add adds x. It returns false, and changes nothing, when x is already
// there (Kafka answers such a CreateAcls with success and writes no
// record), and an error when Validate refuses x.
func (b *Builder) Add(x Binding) (bool, error) {
	b.check()
	if err := Validate(x); err != nil {
		return false, err
	}
	if b.set.Contains(x) {
		return false, nil
	}
	t := b.ownTypeIndex(x.Pattern.Type)
	m := t.mapFor(x.Pattern.PatternType)
	bk := b.ownBucketIn(m, x.Pattern)
	if bk == nil {
		bk = &bucket{pattern: x.Pattern}
		m[x.Pattern.Name] = bk
		b.ownBucket[bk] = true
	}
	i, _ := bk.find(x.Entry)
	bk.entries = slices.Insert(bk.entries, i, newEntry(x.Entry))
	if x.Pattern.PatternType == PatternPrefixed {
		b.resort[x.Pattern.Type] = true
	}
	t.n++
	b.set.n++
	return true, nil
}

// Remove removes x, reporting whether it was there.
func (b *Builder) Remove(x Binding) bool {
	b.check()
	if !b.set.Contains(x) {
		return false
	}
	t := b.ownTypeIndex(x.Pattern.Type)
	m := t.mapFor(x.Pattern.PatternType)
	bk := b.ownBucketIn(m, x.Pattern)
	i, _ := bk.find(x.Entry)
	bk.entries = slices.Delete(bk.entries, i, i+1)
	if len(bk.entries) == 0 {
		delete(m, x.Pattern.Name)
	}
	if x.Pattern.PatternType == PatternPrefixed {
		b.resort[x.Pattern.Type] = true
	}
	t.n--
	b.set.n--
	return true
}

// Set returns the new Set. The Builder is spent: using it again panics,
// since its maps now belong to the Set.
func (b *Builder) Set() *Set {
	b.check()
	b.spent = true
	for rt, t := range b.set.types {
		if t == nil || !b.ownType[rt] {
			continue
		}
		if t.n == 0 {
			b.set.types[rt] = nil
			continue
		}
		if b.resort[rt] && len(t.prefixed) == 0 {
			// nil, as NewSet leaves it: equal sets compare equal.
			t.prefixes = nil
		} else if b.resort[rt] {
			t.prefixes = make([]*bucket, 0, len(t.prefixed))
			for _, bk := range t.prefixed {
				t.prefixes = append(t.prefixes, bk)
			}
			slices.SortFunc(t.prefixes, func(x, y *bucket) int { return strings.Compare(x.pattern.Name, y.pattern.Name) })
		}
	}
	s := b.set
	return &s
}

func (b *Builder) check() {
	if b.spent {
		panic("acl: Builder used after Set")
	}
}

// ownTypeIndex returns rt's index, copied (maps shallowly) the first time
// this builder writes it.
func (b *Builder) ownTypeIndex(rt ResourceType) *typeIndex {
	if b.ownType[rt] {
		return b.set.types[rt]
	}
	t := &typeIndex{literal: map[string]*bucket{}, prefixed: map[string]*bucket{}}
	if old := b.set.types[rt]; old != nil {
		t.literal = maps.Clone(old.literal)
		t.prefixed = maps.Clone(old.prefixed)
		t.prefixes = old.prefixes
		t.n = old.n
	}
	b.set.types[rt] = t
	b.ownType[rt] = true
	return t
}

// ownBucketIn returns the bucket of p in m (nil if none), copied the
// first time this builder writes it. A copied PREFIXED bucket is a new
// pointer, which the old prefixes slice does not hold, so the caller
// marks the type for re-sorting.
func (b *Builder) ownBucketIn(m map[string]*bucket, p ResourcePattern) *bucket {
	bk := m[p.Name]
	if bk == nil || b.ownBucket[bk] {
		return bk
	}
	c := &bucket{pattern: bk.pattern, entries: slices.Clone(bk.entries)}
	m[p.Name] = c
	b.ownBucket[c] = true
	return c
}

func (t *typeIndex) mapFor(pt PatternType) map[string]*bucket {
	if pt == PatternPrefixed {
		return t.prefixed
	}
	return t.literal
}
