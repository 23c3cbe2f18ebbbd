package bench

import (
	"os"
	"testing"

	"github.com/fjordmq/fjord/internal/testcluster"
)

// TestMain removes the fjord binary testcluster builds for the
// end-to-end tests.
func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
