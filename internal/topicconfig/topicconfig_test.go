package topicconfig

import (
	"slices"
	"testing"
)

func TestNew(t *testing.T) {
	def := func(name string) Def { return Def{Name: name, Type: "long", Doc: "d", Validate: LongAtLeast(0)} }
	tab := New([]Def{def("b"), def("c")}, []Def{def("a")})
	var names []string
	for _, d := range tab.Defs() {
		names = append(names, d.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Fatalf("order %v, want by name", names)
	}
	if _, ok := tab.Lookup("b"); !ok {
		t.Fatal("b not found")
	}
	if err := tab.Check("a", "-1"); err == nil || err.Error() != `a="-1": not an integer in range (allowed: 0 to 9223372036854775807)` {
		t.Fatalf("Check: %v", err)
	}
	if err := tab.Check("z", "1"); err == nil || err.Error() != `unknown topic config "z"` {
		t.Fatalf("Check unknown: %v", err)
	}
	for name, parts := range map[string][][]Def{
		"twice":        {{def("a")}, {def("a")}},
		"no validator": {{{Name: "a", Type: "long", Doc: "d"}}},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: New did not panic", name)
				}
			}()
			New(parts...)
		}()
	}
}
