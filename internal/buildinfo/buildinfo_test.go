package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{
		GoVersion: "go1.26.1",
		Main:      debug.Module{Path: "github.com/fjordmq/fjord", Version: "v0.3.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "abc123"},
			{Key: "vcs.time", Value: "2026-12-01T23:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		},
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want Info
		line string
	}{
		{"stamped, modified", stamped,
			Info{Module: "github.com/fjordmq/fjord", Version: "v0.3.0", Commit: "abc123", Modified: true, CommitAt: "2026-12-01T23:00:00Z", GoVersion: "go1.26.1"},
			"v0.3.0 (commit abc123, modified; go1.26.1)"},
		{"devel, clean", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "def"}, {Key: "vcs.modified", Value: "false"}}},
			Info{Version: "(devel)", Commit: "def", GoVersion: runtime.Version()},
			"(devel) (commit def; " + runtime.Version() + ")"},
		{"no stamp", &debug.BuildInfo{}, Info{GoVersion: runtime.Version()},
			"(unknown version) (commit not stamped: go run, go test or -buildvcs=false; " + runtime.Version() + ")"},
		{"no build info", nil, Info{GoVersion: runtime.Version()},
			"(unknown version) (commit not stamped: go run, go test or -buildvcs=false; " + runtime.Version() + ")"},
	} {
		got := FromBuildInfo(tc.info)
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		if got.String() != tc.line {
			t.Errorf("%s: %q, want %q", tc.name, got.String(), tc.line)
		}
	}
}
