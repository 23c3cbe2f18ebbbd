package clustertest

import (
	"os"
	"testing"

	"github.com/fjordmq/fjord/internal/testcluster"
)

// TestMain runs the tests, or, started by a test as an application
// process (ctpAppEnv set), the application.
func TestMain(m *testing.M) {
	if client := os.Getenv(ctpAppEnv); client != "" {
		os.Exit(ctpAppMain(client))
	}
	os.Exit(testcluster.Main(m))
}
