// Package failpoint kills the process at a named point in the code, for
// tests that must crash a real node between two steps that no outside
// timing can separate: a dead-letter write and the commit after it, say.
// A test starts the node with
//
//	FJORD_FAILPOINT=<name>@<marker file>
//
// and the first time the process reaches Hit(name) with the marker file
// absent, it creates the file and sends itself SIGKILL: a real crash, at
// that point, once (a restart with the same environment goes past it,
// since the marker exists). Without the variable, Hit costs a comparison
// of two strings.
package failpoint

import (
	"os"
	"strings"
	"syscall"
)

// armed is the failpoint named by FJORD_FAILPOINT, and its marker.
var armed, marker = parse(os.Getenv("FJORD_FAILPOINT"))

func parse(v string) (name, marker string) {
	name, marker, ok := strings.Cut(v, "@")
	if !ok || name == "" || marker == "" {
		return "", ""
	}
	return name, marker
}

// Hit kills the process if name is the armed failpoint and it has not
// fired before (its marker file does not exist).
func Hit(name string) {
	if armed == "" || name != armed {
		return
	}
	f, err := os.OpenFile(marker, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return // fired before (or the marker cannot be made: do not fire)
	}
	f.Close()
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // SIGKILL is not handled; nothing after Hit runs
}
