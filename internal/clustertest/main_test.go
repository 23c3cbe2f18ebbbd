package clustertest

import (
	"os"
	"testing"

	"github.com/fjordmq/fjord/internal/testcluster"
)

func TestMain(m *testing.M) { os.Exit(testcluster.Main(m)) }
