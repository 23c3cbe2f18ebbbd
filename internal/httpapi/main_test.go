package httpapi_test

import (
	"os"
	"testing"

	"github.com/fjordmq/fjord/internal/testcluster"
)

// TestMain removes the fjord binary the CLI comparisons build.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
