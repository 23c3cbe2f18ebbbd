package freeport

import (
	"net"
	"strconv"
	"testing"
)

func TestTakeDistinctOutsideTheEphemeralRange(t *testing.T) {
	elo, ehi, err := ephemeralRange()
	if err != nil {
		t.Fatal(err)
	}
	_, _, outside := rangeOutside(elo, ehi)
	seen := make(map[int]bool)
	for range 20 {
		ports, err := Take("127.0.0.1", 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(ports) != 3 {
			t.Fatalf("got %d ports, want 3", len(ports))
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			if outside && p >= elo && p <= ehi {
				t.Fatalf("port %d is in the kernel's ephemeral range %d-%d", p, elo, ehi)
			}
			// Free now: a node can bind it.
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
			if err != nil {
				t.Fatalf("port %d: %v", p, err)
			}
			l.Close()
		}
	}
}

func TestRangeOutside(t *testing.T) {
	for _, tc := range []struct {
		elo, ehi int
		lo, hi   int
		ok       bool
	}{
		{32768, 60999, 10000, 32767, true}, // Linux's default
		{49152, 65535, 10000, 49151, true}, // IANA's
		{1024, 20000, 20001, 65535, true},  // nothing below, so above
		{1024, 65535, 0, 0, false},         // everything is ephemeral
		{11000, 64000, 0, 0, false},        // too little either side
	} {
		lo, hi, ok := rangeOutside(tc.elo, tc.ehi)
		if lo != tc.lo || hi != tc.hi || ok != tc.ok {
			t.Errorf("rangeOutside(%d, %d) = %d, %d, %v; want %d, %d, %v", tc.elo, tc.ehi, lo, hi, ok, tc.lo, tc.hi, tc.ok)
		}
	}
}

func TestParseRange(t *testing.T) {
	if lo, hi, err := parseRange("32768\t60999\n"); err != nil || lo != 32768 || hi != 60999 {
		t.Fatalf("parseRange = %d, %d, %v", lo, hi, err)
	}
	for _, bad := range []string{"", "1", "a b", "1 2 3", "0 100", "100 70000", "600 500"} {
		if _, _, err := parseRange(bad); err == nil {
			t.Errorf("parseRange(%q): no error", bad)
		}
	}
}
