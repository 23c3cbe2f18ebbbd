package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// BinaryEnv names the environment variable that, when set, is the path of
// a prebuilt fjord binary to run instead of building one.
const BinaryEnv = "FJORD_BIN"

// fjordPackage is what Binary builds.
const fjordPackage = "github.com/fjordmq/fjord/cmd/fjord"

// built is the binary built once per test process.
var built struct {
	once sync.Once
	dir  string // temporary directory holding it; removed by Main
	path string
	err  error
}

// Binary returns the path of the fjord binary the nodes run: $FJORD_BIN if
// set, else one built from this module once per test process. A failed
// build fails every test that asks, each with the compiler's output.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func binary() (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		abs, err := filepath.Abs(p)
		if err != nil {
			return "", fmt.Errorf("$%s=%q: %v", BinaryEnv, p, err)
		}
		st, err := os.Stat(abs)
		if err != nil {
			return "", fmt.Errorf("$%s=%q: %v", BinaryEnv, p, err)
		}
		if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return "", fmt.Errorf("$%s=%q is not an executable file", BinaryEnv, p)
		}
		return abs, nil
	}
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "fjord-testcluster-")
		if err != nil {
			built.err = fmt.Errorf("building fjord: %v", err)
			return
		}
		built.dir = dir
		path := filepath.Join(dir, "fjord")
		// The test's working directory is its package directory, inside
		// the module, so the package path resolves against this module's
		// go.mod and the binary is built from the same tree as the test.
		cmd := exec.Command("go", "build", "-o", path, fjordPackage)
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build %s: %v\n%s", fjordPackage, err, out)
			return
		}
		built.path = path
	})
	return built.path, built.err
}

// Main runs the tests, then kills the nodes of shared clusters
// (StartSharedCluster) and removes the binary Binary built, if any. Use
// it from TestMain: os.Exit(testcluster.Main(m)).
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.running = true
	shared.mu.Unlock()
	code := m.Run()
	stopShared(code != 0)
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	return code
}
