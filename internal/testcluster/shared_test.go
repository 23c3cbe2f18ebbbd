package testcluster

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// A shared cluster's nodes outlive the test that used them and are
// killed, with their directories removed, when the binary's owner ends;
// the tails of their output are printed only if the run failed.
func TestSharedClusterOutlivesTheTest(t *testing.T) {
	for _, failed := range []bool{false, true} {
		t.Run(fmt.Sprintf("failed=%v", failed), func(t *testing.T) {
			var log bytes.Buffer
			o := &binaryOwner{log: &log}
			c, err := startCluster(o, ClusterOptions{Node: fakeOptions(t, fakeOK)})
			if err != nil {
				t.Fatal(err)
			}
			t.Run("user", func(t *testing.T) {
				for _, n := range c.Nodes() {
					if err := n.CheckReady(); err != nil {
						t.Fatalf("node %d: %v", n.ID(), err)
					}
				}
			})
			var pids []int
			for _, n := range c.Nodes() {
				if !n.Running() {
					t.Fatalf("node %d stopped with the test that used it", n.ID())
				}
				pids = append(pids, n.Pid())
			}
			root := o.root
			if !strings.HasPrefix(c.Node(1).DataDir(), root+string(os.PathSeparator)) {
				t.Fatalf("data directory %s is not under the owner's %s", c.Node(1).DataDir(), root)
			}

			o.end(failed)
			for i, n := range c.Nodes() {
				if n.Running() {
					t.Fatalf("node %d running after the owner ended", n.ID())
				}
				if err := syscall.Kill(pids[i], 0); err == nil {
					t.Fatalf("node %d's pid %d alive after the owner ended", n.ID(), pids[i])
				}
				if printed := strings.Contains(log.String(), "fake: serving on "+n.KafkaAddr()); printed != failed {
					t.Fatalf("failed=%v: node %d's output printed: %v\n%s", failed, n.ID(), printed, log.String())
				}
			}
			if _, err := os.Stat(root); !os.IsNotExist(err) {
				t.Fatalf("the owner's directory %s after it ended: %v", root, err)
			}
		})
	}
}

// A shared cluster has no test to fail: a method that would fail one
// panics instead, saying what went wrong.
func TestSharedClusterPanicsWhereATestWouldFail(t *testing.T) {
	o := &binaryOwner{}
	c, err := startCluster(o, ClusterOptions{Node: fakeOptions(t, fakeOK)})
	if err != nil {
		t.Fatal(err)
	}
	defer o.end(false)
	defer func() {
		r := recover()
		if msg, _ := r.(string); !strings.Contains(msg, "no node 9 in a cluster of 3") {
			t.Fatalf("Node(9) on a shared cluster: recovered %v, want a panic naming the bad id", r)
		}
	}()
	c.Node(9)
}

// Without Main nothing would stop a shared cluster: it is refused.
func TestStartSharedClusterNeedsMain(t *testing.T) {
	shared.mu.Lock()
	was := shared.running
	shared.running = false
	shared.mu.Unlock()
	defer func() {
		shared.mu.Lock()
		shared.running = was
		shared.mu.Unlock()
	}()
	c, err := StartSharedCluster(ClusterOptions{Node: fakeOptions(t, fakeOK)})
	if err == nil || !strings.Contains(err.Error(), "testcluster.Main") {
		t.Fatalf("StartSharedCluster outside Main: %v, %v; want an error naming Main", c, err)
	}
}

// LogTailsOnFailure prints every node's tail through the test that
// fails, and nothing through one that passes.
func TestLogTailsOnFailure(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Node: fakeOptions(t, fakeOK)})
	for _, failed := range []bool{false, true} {
		rt := &recordingTB{TB: t}
		c.LogTailsOnFailure(rt)
		rt.failed = failed
		rt.runCleanups()
		printed := strings.Join(rt.logs, "\n")
		for _, n := range c.Nodes() {
			if got := strings.Contains(printed, "fake: serving on "+n.KafkaAddr()); got != failed {
				t.Fatalf("failed=%v: node %d's tail printed: %v\n%s", failed, n.ID(), got, printed)
			}
		}
	}
}
