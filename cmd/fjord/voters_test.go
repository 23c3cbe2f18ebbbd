package main

import (
	"strings"
	"testing"
)

// add-voter and remove-voter against the package's node, a quorum of
// one: every change it cannot make is refused with the controller's
// reason and leaves the quorum as it was. (A successful change needs an
// observer: clustertest's TestBrokerOnlyNode.)
func TestClusterVotersBadInput(t *testing.T) {
	b := brokers(t)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"name the node: --node-id N", []string{"add-voter"}},
		{"name the voter: --node-id N", []string{"remove-voter"}},
		{`"--node-id" flag: allowed: an integer from 0`, []string{"add-voter", "--node-id", "-1"}},
		{`invalid argument "x" for "--node-id"`, []string{"remove-voter", "--node-id", "x"}},
		{`--controller-addr "nohost": want host:port`, []string{"add-voter", "--node-id", "2", "--controller-addr", "nohost"}},
		{`--controller-addr "127.0.0.1:99999": want host:port`, []string{"add-voter", "--node-id", "2", "--controller-addr", "127.0.0.1:99999"}},
		{"DUPLICATE_VOTER", []string{"add-voter", "--node-id", "1"}},
		{"node 9 is not an observer of the metadata log", []string{"add-voter", "--node-id", "9"}},
		{"VOTER_NOT_FOUND", []string{"remove-voter", "--node-id", "9"}},
		{"the quorum's last voter", []string{"remove-voter", "--node-id", "1"}},
	} {
		fails(t, tc.want, append([]string{"cluster", "--brokers", b}, tc.args...)...)
	}
	r := ok(t, "", "cluster", "describe", "--brokers", b)
	if !strings.Contains(r.stdout, "Controller quorum: voters 1, epoch") {
		t.Errorf("the quorum changed:\n%s", r.stdout)
	}
}
