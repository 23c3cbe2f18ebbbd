package testcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
)

// owner is what a Node or Cluster needs of whoever it belongs to: a test
// (any testing.TB) or, for a shared cluster, the test binary (binaryOwner).
// Fatal and Fatalf are called only by the methods documented as failing
// the test, from the owner's goroutine; the rest may be called from any.
type owner interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	// TempDir is a new directory that outlives every process started
	// under the owner.
	TempDir() string
	// Cleanup registers f to run when the owner ends, after the
	// functions registered later (LIFO, as testing runs them).
	Cleanup(f func())
	// Failed reports whether the owner failed, when its cleanups run:
	// then each node prints the tail of its output.
	Failed() bool
}

// shared is the binary's owner of shared clusters, and whether Main is
// running the tests (a shared cluster without Main would never be
// stopped, and its directories never removed).
var shared struct {
	mu      sync.Mutex
	running bool // set by Main before m.Run
	owner   *binaryOwner
}

// StartSharedCluster starts a cluster that belongs to the test binary
// rather than to one test, for tests that each need a cluster but can
// share one: each uses topics of its own and leaves every node running,
// so starting one cluster per test would only cost time. Main kills its
// nodes once every test has run, printing the tail of each node's output
// if the run failed, and removes their directories; the package must
// use Main, or StartSharedCluster refuses.
//
// Call it once (a sync.Once in the test package) and hand the cluster to
// the tests that share it. Its methods and its nodes' that fail the test
// (Node with a bad id, Start, Stop, Kill, Restart) have no test to fail
// and panic: a test sharing the cluster must not stop its nodes anyway,
// under the other tests' feet. ControllerID and Leader take the calling test's t
// and work as on any cluster. A test that fails sees the nodes' output
// only at the end of the run unless it calls LogTailsOnFailure.
func StartSharedCluster(opts ClusterOptions) (*Cluster, error) {
	shared.mu.Lock()
	if !shared.running {
		shared.mu.Unlock()
		return nil, errors.New("testcluster: StartSharedCluster needs TestMain to run the tests through testcluster.Main, which stops shared clusters")
	}
	if shared.owner == nil {
		shared.owner = &binaryOwner{}
	}
	o := shared.owner
	shared.mu.Unlock()
	return startCluster(o, opts)
}

// LogTailsOnFailure makes t print the tail of every node's output if t
// fails: for a test using a shared cluster, whose nodes print theirs only
// when the whole run ends. The tails hold every sharing test's traffic.
func (c *Cluster) LogTailsOnFailure(t testing.TB) {
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range c.nodes {
				n.logTail(t)
			}
		}
	})
}

// stopShared runs the shared owner's cleanups, which kill its nodes;
// Main calls it after m.Run with whether the run failed.
func stopShared(failed bool) {
	shared.mu.Lock()
	o := shared.owner
	shared.owner = nil
	shared.running = false
	shared.mu.Unlock()
	if o != nil {
		o.end(failed)
	}
}

// binaryOwner owns shared clusters for the life of the test binary. It
// has no test to fail: Fatal and Fatalf panic, Logf writes to stderr.
type binaryOwner struct {
	log io.Writer // where Logf writes; nil: os.Stderr

	mu       sync.Mutex
	root     string // holds every TempDir; "" until the first
	cleanups []func()
	failed   bool // set by end
}

func (*binaryOwner) Helper() {}

func (*binaryOwner) Fatal(args ...any) {
	panic("testcluster: shared cluster: " + fmt.Sprint(args...))
}

func (*binaryOwner) Fatalf(format string, args ...any) {
	panic("testcluster: shared cluster: " + fmt.Sprintf(format, args...))
}

func (o *binaryOwner) Logf(format string, args ...any) {
	w := o.log
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, "testcluster: shared cluster: "+format+"\n", args...)
}

func (o *binaryOwner) TempDir() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.root == "" {
		root, err := os.MkdirTemp("", "fjord-testcluster-shared-")
		if err != nil {
			panic(fmt.Sprintf("testcluster: shared cluster: TempDir: %v", err))
		}
		o.root = root
	}
	dir, err := os.MkdirTemp(o.root, "")
	if err != nil {
		panic(fmt.Sprintf("testcluster: shared cluster: TempDir: %v", err))
	}
	return dir
}

func (o *binaryOwner) Cleanup(f func()) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.cleanups = append(o.cleanups, f)
}

func (o *binaryOwner) Failed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failed
}

// end runs the cleanups, the latest first, then removes the directories:
// the processes are gone before their data directories are.
func (o *binaryOwner) end(failed bool) {
	o.mu.Lock()
	o.failed = failed
	cleanups, root := o.cleanups, o.root
	o.cleanups = nil
	o.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	if root != "" {
		os.RemoveAll(root)
	}
}
