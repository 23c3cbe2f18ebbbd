// Package buildinfo says what the running binary was built from, as the
// Go toolchain stamped it: the module version, the commit and whether
// the tree had uncommitted changes, and the Go version. `fjord version`
// prints it and benchmark results record it.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is a binary's stamp. go build in a repository stamps the commit;
// go run, test binaries and -buildvcs=false do not (Commit is then "").
type Info struct {
	Module    string `json:"module"`      // the main module's path
	Version   string `json:"version"`     // its version: "(devel)" for a build in a checkout
	Commit    string `json:"commit"`      // vcs.revision
	Modified  bool   `json:"modified"`    // vcs.modified: the tree differed from Commit
	CommitAt  string `json:"commit_time"` // vcs.time, RFC 3339
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's stamp.
func Read() Info {
	info, _ := debug.ReadBuildInfo()
	return FromBuildInfo(info)
}

// FromBuildInfo returns the stamp in info, which may be nil (a binary
// built without module support).
func FromBuildInfo(info *debug.BuildInfo) Info {
	out := Info{GoVersion: runtime.Version()}
	if info == nil {
		return out
	}
	out.Module, out.Version = info.Main.Path, info.Main.Version
	if info.GoVersion != "" {
		out.GoVersion = info.GoVersion
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Commit = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		case "vcs.time":
			out.CommitAt = s.Value
		}
	}
	return out
}

// String is one line: version, commit, Go version, e.g.
// "v0.3.0 (commit 1f4670e..., modified; go1.26.0)".
func (i Info) String() string {
	version := i.Version
	if version == "" {
		version = "(unknown version)"
	}
	commit := "commit not stamped: go run, go test or -buildvcs=false"
	if i.Commit != "" {
		commit = "commit " + i.Commit
		if i.Modified {
			commit += ", modified"
		}
	}
	return version + " (" + commit + "; " + i.GoVersion + ")"
}
