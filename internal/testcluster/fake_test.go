package testcluster

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The harness's own tests run it against a fake node: this test binary,
// re-executed with fakeModeEnv set, takes `fjord serve`'s flags and
// behaves as the mode says. The real binary is exercised by internal/e2e.
const fakeModeEnv = "FJORD_TESTCLUSTER_FAKE"

// Fake modes.
const (
	fakeOK         = "ok"          // ready after a few probes; SIGTERM exits 0
	fakeExit       = "exit"        // fails at once with status 3
	fakeNeverReady = "never-ready" // /readyz answers 503 forever
	fakeBadExit    = "bad-exit"    // SIGTERM exits with status 1
	fakeIgnoreTerm = "ignore-term" // SIGTERM is ignored
	fakePortTaken  = "port-taken"  // first run in a data dir (or fakeOnceDirEnv) says "address already in use" and exits 1
	fakeQuorum     = "quorum"      // ready only while a majority of --controller-quorum-voters accept connections
)

// fakeOnceDirEnv, when set, is where fakePortTaken keeps its marker (one
// per node id), so a cluster's retry, which takes fresh data
// directories, finds it.
const fakeOnceDirEnv = "FJORD_TESTCLUSTER_FAKE_ONCE_DIR"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeModeEnv); mode != "" {
		os.Exit(runFake(mode))
	}
	os.Exit(Main(m))
}

func fakeOptions(t *testing.T, mode string) Options {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Binary: exe, Env: []string{fakeModeEnv + "=" + mode}}
}

// runFake is the fake node's main.
func runFake(mode string) int {
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		fmt.Fprintln(os.Stderr, "fake: want `serve`, got", os.Args[1:])
		return 2
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	nodeID := fs.Int("node-id", 0, "")
	dataDir := fs.String("data-dir", "", "")
	kafkaAddr := fs.String("kafka-addr", "", "")
	advertised := fs.String("advertised-kafka-addr", "", "")
	controllerAddr := fs.String("controller-addr", "", "")
	httpAddr := fs.String("http-addr", "", "")
	logLevel := fs.String("log-level", "", "")
	voters := fs.String("controller-quorum-voters", "", "")
	extra := fs.String("extra", "", "")
	if err := fs.Parse(os.Args[2:]); err != nil {
		return 2
	}
	if *nodeID == 0 || *dataDir == "" || *kafkaAddr == "" || *advertised != *kafkaAddr || *controllerAddr == "" || *httpAddr == "" || *logLevel == "" {
		fmt.Fprintln(os.Stderr, "fake: missing or inconsistent flags:", os.Args[2:])
		return 2
	}

	// What the harness can check afterwards: one line per start.
	var fjordEnv []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "FJORD_") && !strings.HasPrefix(kv, fakeModeEnv+"=") && !strings.HasPrefix(kv, fakeOnceDirEnv+"=") {
			fjordEnv = append(fjordEnv, kv)
		}
	}
	sort.Strings(fjordEnv)
	line := fmt.Sprintf("pid=%d kafka=%s controller=%s http=%s level=%s extra=%s env=%v voters=%s\n",
		os.Getpid(), *kafkaAddr, *controllerAddr, *httpAddr, *logLevel, *extra, fjordEnv, *voters)
	f, err := os.OpenFile(filepath.Join(*dataDir, "starts"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 1
	}
	f.WriteString(line)
	f.Close()

	switch mode {
	case fakeExit:
		fmt.Fprintln(os.Stderr, "fake: failing on purpose")
		return 3
	case fakePortTaken:
		dir := *dataDir
		if d := os.Getenv(fakeOnceDirEnv); d != "" {
			dir = d
		}
		marker := filepath.Join(dir, fmt.Sprintf("port-taken-once-%d", *nodeID))
		if _, err := os.Stat(marker); err != nil {
			os.WriteFile(marker, []byte(*kafkaAddr), 0o644)
			fmt.Fprintf(os.Stderr, "fake: listen tcp %s: bind: address already in use\n", *kafkaAddr)
			return 1
		}
	}

	term := make(chan os.Signal, 1)
	if mode == fakeIgnoreTerm {
		signal.Ignore(syscall.SIGTERM)
	} else {
		signal.Notify(term, syscall.SIGTERM)
	}

	for _, addr := range []string{*kafkaAddr, *controllerAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 1
		}
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 1
	}
	var probes atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		// Not ready for the first probes, so the harness's polling is
		// what gets it through.
		if mode == fakeNeverReady || probes.Add(1) <= 3 {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		if mode == fakeQuorum {
			if up, all := votersUp(*voters); 2*up <= all {
				http.Error(w, fmt.Sprintf("no quorum: %d of %d voters up", up, all), http.StatusServiceUnavailable)
				return
			}
		}
		fmt.Fprintln(w, "ready")
	})
	go http.Serve(hl, mux)
	fmt.Fprintln(os.Stderr, "fake: serving on", *kafkaAddr)

	<-term
	fmt.Fprintln(os.Stderr, "fake: SIGTERM")
	if mode == fakeBadExit {
		return 1
	}
	return 0
}

// votersUp counts the voters of list (id@host:port,...) whose controller
// port accepts a connection.
func votersUp(list string) (up, all int) {
	for _, e := range strings.Split(list, ",") {
		_, addr, ok := strings.Cut(e, "@")
		if !ok {
			continue
		}
		all++
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			up++
		}
	}
	return up, all
}
