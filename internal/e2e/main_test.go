package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }

// longRun reports whether FJORD_E2E_LONG=1 asks for the long variants.
func longRun() bool { return os.Getenv("FJORD_E2E_LONG") == "1" }

// scale returns normal, or long under FJORD_E2E_LONG=1.
func scale(normal, long int) int {
	if longRun() {
		return long
	}
	return normal
}

// testContext is a context that ends with the test or after d.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	if longRun() {
		d *= 10
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func startNode(t *testing.T) *testcluster.Node {
	t.Helper()
	return testcluster.Start(t, testcluster.Options{})
}

// newClient returns a franz-go client of n, closed at the end of the test.
func newClient(t *testing.T, n *testcluster.Node, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(n.Brokers())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func newAdmin(t *testing.T, n *testcluster.Node) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, n))
}

// createTopic creates a topic with kadm and fails the test if the node
// refuses. configs are name=value pairs.
func createTopic(ctx context.Context, t *testing.T, adm *kadm.Client, name string, partitions int32, configs ...string) kadm.CreateTopicResponse {
	t.Helper()
	cfg := make(map[string]*string)
	for _, kv := range configs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("config %q is not name=value", kv)
		}
		cfg[k] = &v
	}
	resp, err := adm.CreateTopic(ctx, partitions, 1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s (%d partitions, %v): %v %s", name, partitions, configs, err, resp.ErrMessage)
	}
	return resp
}

// readAll reads the topics from log start to high watermark with franz-go.
func readAll(ctx context.Context, t *testing.T, n *testcluster.Node, topics ...string) map[testcluster.TopicPartition][]testcluster.Record {
	t.Helper()
	logs, err := testcluster.ReadAll(ctx, n.Brokers(), topics...)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// eventually is testutil.Eventually with the deadline stretched tenfold
// under FJORD_E2E_LONG=1, as every wait in the long variants is.
func eventually(t *testing.T, d time.Duration, cond func() error) {
	t.Helper()
	if longRun() {
		d *= 10
	}
	testutil.Eventually(t, d, cond)
}

// errorList collects errors from client callbacks on other goroutines.
type errorList struct {
	mu   sync.Mutex
	errs []error
	n    int
}

func (l *errorList) add(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	if len(l.errs) < 10 {
		l.errs = append(l.errs, err)
	}
}

func (l *errorList) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == 0 {
		return nil
	}
	return fmt.Errorf("%d errors, the first %d: %w", l.n, len(l.errs), errors.Join(l.errs...))
}

// kcatPath returns kcat's path, installing Debian's package first when it
// is missing and the test runs as root. Never skips: without kcat the test
// fails and says how to get it.
func kcatPath(t *testing.T) string {
	t.Helper()
	kcatInstall.Do(func() {
		if p, err := exec.LookPath("kcat"); err == nil {
			kcatInstall.path = p
			return
		}
		if os.Geteuid() != 0 {
			kcatInstall.err = errors.New("kcat is not on PATH and the test is not root, so it cannot install it: " +
				"install it with `sudo apt-get install -y kcat` (Debian/Ubuntu; the package was kafkacat before Debian 11), " +
				"or run .ci/run, which does")
			return
		}
		var log bytes.Buffer
		install := func() error {
			cmd := exec.Command("apt-get", "install", "-y", "--no-install-recommends", "kcat")
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			cmd.Stdout, cmd.Stderr = &log, &log
			return cmd.Run()
		}
		if err := install(); err != nil {
			// A fresh image has no package lists yet.
			update := exec.Command("apt-get", "update")
			update.Stdout, update.Stderr = &log, &log
			if uerr := update.Run(); uerr != nil {
				kcatInstall.err = fmt.Errorf("apt-get update: %v\n%s", uerr, log.String())
				return
			}
			if err := install(); err != nil {
				kcatInstall.err = fmt.Errorf("apt-get install -y kcat: %v\n%s", err, log.String())
				return
			}
		}
		p, err := exec.LookPath("kcat")
		if err != nil {
			kcatInstall.err = fmt.Errorf("kcat still not on PATH after apt-get install: %v\n%s", err, log.String())
			return
		}
		kcatInstall.path = p
	})
	if kcatInstall.err != nil {
		t.Fatal(kcatInstall.err)
	}
	return kcatInstall.path
}

var kcatInstall struct {
	sync.Once
	path string
	err  error
}

// runKcat runs kcat with args and stdin, failing the test on a non-zero
// exit or an error line. It returns stdout. kcat keeps retrying after a
// protocol error (a consumer refetches forever), so the first such line
// ends it at once rather than at the deadline.
func runKcat(ctx context.Context, t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcatPath(t), args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout bytes.Buffer
	stderr := &watchWriter{match: [][]byte{[]byte("PROTOERR"), []byte("ERROR")}, onMatch: cancel}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err := cmd.Run()
	if stderr.matched() {
		t.Fatalf("kcat %s reported errors:\n%s", strings.Join(args, " "), stderr.String())
	}
	if err != nil {
		t.Fatalf("kcat %s: %v\nstderr:\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// watchWriter keeps what a child writes and calls onMatch once when a
// line contains one of match. exec.Cmd writes to it from one goroutine;
// the mutex is for the test reading it.
type watchWriter struct {
	match   [][]byte
	onMatch func()

	mu  sync.Mutex
	buf bytes.Buffer
	hit bool
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.hit {
		for _, m := range w.match {
			if bytes.Contains(w.buf.Bytes(), m) {
				w.hit = true
				w.onMatch()
				break
			}
		}
	}
	return len(p), nil
}

func (w *watchWriter) matched() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.hit
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
