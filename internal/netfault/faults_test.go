package netfault

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// The fault methods refuse, with what was wrong, what they cannot do:
// a node that does not exist, a node cut from itself, a split that
// names a node twice or leaves one out, a delay that is not one, and any
// fault of a network that was closed.
func TestFaultsRefused(t *testing.T) {
	// A network with no links: every refusal comes before a command.
	nw := &Network{nodes: make([]node, 3)}
	closed := &Network{nodes: make([]node, 3)}
	closed.mu.closed = true
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"cut an unknown node", nw.Cut(1, 4), "node 4 is not one of nodes 1 to 3"},
		{"cut from an unknown node", nw.CutBoth(0, 1), "node 0 is not one of nodes 1 to 3"},
		{"cut from itself", nw.Cut(2, 2), "node 2 cannot be cut from or delayed to itself"},
		{"cut both from itself", nw.CutBoth(3, 3), "node 3 cannot be cut"},
		{"isolate an unknown node", nw.Isolate(-1), "node -1 is not one of nodes 1 to 3"},
		{"split in one group", nw.Split([]int{1, 2, 3}), "split into 1 groups: want at least two"},
		{"split in none", nw.Split(), "split into 0 groups"},
		{"split with an empty group", nw.Split([]int{1, 2, 3}, nil), "group 2 of the split is empty"},
		{"split with a node twice", nw.Split([]int{1, 2}, []int{2, 3}), "node 2 is in groups 1 and 2 of the split"},
		{"split with a node twice in a group", nw.Split([]int{1, 1}, []int{2, 3}), "node 1 is in groups 1 and 1"},
		{"split leaving nodes out", nw.Split([]int{1}, []int{2}), "nodes [3] are in no group of the split"},
		{"split with an unknown node", nw.Split([]int{1}, []int{2, 3, 4}), "group 2 of the split: node 4 is not one of nodes 1 to 3"},
		{"delay an unknown node", nw.Delay(1, 9, time.Second), "node 9 is not one of nodes 1 to 3"},
		{"delay to itself", nw.Delay(1, 1, time.Second), "cannot be cut from or delayed to itself"},
		{"delay of zero", nw.Delay(1, 2, 0), "delay 0s: want a positive delay"},
		{"negative delay", nw.Delay(1, 2, -time.Second), "delay -1s: want a positive delay"},
		{"drops of an unknown node", func() error { _, err := nw.Dropped(1, 4); return err }(), "node 4 is not one of nodes 1 to 3"},
		{"drops of a link not cut", func() error { _, err := nw.Dropped(1, 2); return err }(), "the link 1 -> 2 is not cut"},
		{"dial from an unknown node", func() error { _, err := nw.DialFrom(4, "127.0.0.1:1", time.Second); return err }(), "node 4 is not one of nodes 1 to 3"},
		{"dial a name", func() error { _, err := nw.DialFrom(1, "localhost:1", time.Second); return err }(), "want an IP address, not a name"},
		{"enter an unknown node", nw.InNamespace(0, func() error { return nil }), "node 0 is not one of nodes 1 to 3"},
		{"cut when closed", closed.Cut(1, 2), ErrClosed.Error()},
		{"isolate when closed", closed.Isolate(1), ErrClosed.Error()},
		{"delay when closed", closed.Delay(1, 2, time.Second), ErrClosed.Error()},
		{"heal when closed", closed.Heal(), ErrClosed.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", tc.err, tc.want)
			}
		})
	}
}

// The links each fault cuts.
func TestFaultLinks(t *testing.T) {
	set := func(links []link, err error) map[link]bool {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := map[link]bool{}
		for _, l := range links {
			out[l] = true
		}
		return out
	}
	for _, tc := range []struct {
		name string
		got  map[link]bool
		want []link
	}{
		{"cut", set(pairLinks(3, 1, 2, false)), []link{{1, 2}}},
		{"cut both", set(pairLinks(3, 1, 2, true)), []link{{1, 2}, {2, 1}}},
		{"isolate", set(isolateLinks(3, 2)), []link{{2, 1}, {1, 2}, {2, 3}, {3, 2}}},
		{"isolate the only node", set(isolateLinks(1, 1)), nil},
		{"split", set(splitLinks(3, [][]int{{1}, {3, 2}})), []link{{1, 2}, {2, 1}, {1, 3}, {3, 1}}},
		{"split in three", set(splitLinks(3, [][]int{{1}, {2}, {3}})), []link{{1, 2}, {2, 1}, {1, 3}, {3, 1}, {2, 3}, {3, 2}}},
		{"split of five", set(splitLinks(5, [][]int{{1, 2}, {3, 4, 5}})), []link{
			{1, 3}, {1, 4}, {1, 5}, {2, 3}, {2, 4}, {2, 5}, {3, 1}, {4, 1}, {5, 1}, {3, 2}, {4, 2}, {5, 2}}},
	} {
		want := map[link]bool{}
		for _, l := range tc.want {
			want[l] = true
		}
		if !maps.Equal(tc.got, want) {
			t.Errorf("%s: links %v, want %v", tc.name, slices.Collect(maps.Keys(tc.got)), tc.want)
		}
	}
}
