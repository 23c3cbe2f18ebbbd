package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	// A test binary has no commit stamp; what the stamp's parts look like
	// is buildinfo's test. Here: both spellings print the one line.
	want := "fjord " + buildinfo.Read().String() + "\n"
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := fjord(t, "", args...)
		if r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("fjord %s: exit %d, stdout %q, stderr %q; want %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
		}
	}
	if !strings.Contains(want, runtime.Version()) || !strings.Contains(want, "commit") {
		t.Errorf("version line %q does not name the Go version and the commit", want)
	}
	fails(t, `unknown command "now" for "fjord version"`, "version", "now")
	fails(t, "unknown flag: --bogus", "version", "--bogus")
	if r := fjord(t, "", "--help"); !strings.Contains(r.stdout, "version") {
		t.Errorf("fjord --help does not list version:\n%s", r.stdout)
	}
}
