package timeline

import (
	"slices"
	"testing"
)

func TestAssignLanes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		extents  []extent
		maxLanes int
		lanes    []int
		used     int
	}{
		{"none", nil, 3, []int{}, 0},
		{"apart share the top lane", []extent{{0, 10}, {20, 30}, {40, 50}}, 3, []int{0, 0, 0}, 1},
		{"closer than the gap", []extent{{0, 10}, {12, 30}}, 3, []int{0, 1}, 2},
		{"exactly the gap apart", []extent{{0, 10}, {15, 30}}, 3, []int{0, 0}, 1},
		{"overlapping stack", []extent{{0, 100}, {10, 20}, {30, 40}, {50, 60}}, 3, []int{0, 1, 1, 1}, 2},
		{"taken by left edge, not by order", []extent{{50, 60}, {0, 100}, {10, 20}}, 3, []int{1, 0, 1}, 2},
		{"a freed upper lane is reused", []extent{{0, 10}, {5, 100}, {20, 30}}, 3, []int{0, 1, 0}, 2},
		{"beyond maxLanes", []extent{{0, 100}, {1, 100}, {2, 100}, {200, 210}}, 2, []int{0, 1, -1, 0}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lanes, used := assignLanes(tc.extents, 5, tc.maxLanes)
			if used != tc.used || !slices.Equal(lanes, tc.lanes) {
				t.Errorf("assignLanes = %v, %d; want %v, %d", lanes, used, tc.lanes, tc.used)
			}
		})
	}
}

func TestFamilyOf(t *testing.T) {
	for kind, want := range map[string]family{
		"kill": processFaults, "pause": processFaults, "restart": processFaults, "kill-all": processFaults,
		"isolate": networkFaults, "split": networkFaults, "bridge": networkFaults, "cut": networkFaults, "delay": networkFaults,
		"torn-write": diskFaults, "bit-flip": diskFaults,
		"": otherFaults, "clock-skew": otherFaults, "KILL": processFaults,
	} {
		if got := familyOf(kind); got != want {
			t.Errorf("familyOf(%q) = %s, want %s", kind, familyNames[got], familyNames[want])
		}
	}
}

func TestUnion(t *testing.T) {
	for _, tc := range []struct {
		name          string
		extents, want []extent
	}{
		{"none", nil, nil},
		{"apart", []extent{{20, 30}, {0, 10}}, []extent{{0, 10}, {20, 30}}},
		{"overlapping", []extent{{0, 10}, {5, 20}, {8, 12}}, []extent{{0, 20}}},
		{"touching", []extent{{0, 10}, {10, 20}}, []extent{{0, 20}}},
		{"one inside another", []extent{{0, 100}, {10, 20}, {150, 160}}, []extent{{0, 100}, {150, 160}}},
	} {
		if got := union(tc.extents); !slices.Equal(got, tc.want) {
			t.Errorf("%s: union = %v, want %v", tc.name, got, tc.want)
		}
	}
}
