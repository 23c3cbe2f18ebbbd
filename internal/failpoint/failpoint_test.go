package failpoint

import "testing"

func TestParse(t *testing.T) {
	for in, want := range map[string][2]string{
		"":                {"", ""},
		"poison.x":        {"", ""},
		"poison.x@":       {"", ""},
		"@/tmp/m":         {"", ""},
		"poison.x@/tmp/m": {"poison.x", "/tmp/m"},
		"a@b@c":           {"a", "b@c"},
	} {
		if n, m := parse(in); n != want[0] || m != want[1] {
			t.Errorf("parse(%q) = %q, %q; want %q, %q", in, n, m, want[0], want[1])
		}
	}
}

// Hit of a point that is not armed returns.
func TestHitUnarmed(t *testing.T) {
	armed, marker = "other", t.TempDir()+"/m"
	defer func() { armed, marker = "", "" }()
	Hit("poison.x")
}
