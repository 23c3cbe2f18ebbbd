package controlplane_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The broker side reaches the control plane only through this package,
// so it never depends on the Raft library, its stores, or the
// controller that wraps them: a remote Client can replace the local one
// without touching a line above it. Only node, the wiring, and the
// controller itself may.
func TestBrokerSideDependsOnTheSeamOnly(t *testing.T) {
	const mod = "github.com/fjordmq/fjord/internal/"
	brokerSide := []string{"controlplane", "controlplane/forward", "peers", "leaderfetch", "kafkaserver", "txn", "txn/txnstatetopic", "group", "group/offsetstopic", "coordload", "replica", "httpapi", "storage", "metadata", "record", "topicconfig"}
	forbidden := []string{"github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb", mod + "controller", mod + "node"}

	args := []string{"list", "-f", `{{.ImportPath}} {{join .Deps " "}}`}
	for _, p := range brokerSide {
		args = append(args, mod+p)
	}
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(brokerSide) {
		t.Fatalf("go list answered %d packages, want %d:\n%s", len(lines), len(brokerSide), out)
	}
	for _, l := range lines {
		pkg, deps, _ := strings.Cut(l, " ")
		for _, d := range strings.Fields(deps) {
			for _, f := range forbidden {
				if d == f || strings.HasPrefix(d, f+"/") {
					t.Errorf("%s depends on %s", pkg, d)
				}
			}
		}
	}
}
