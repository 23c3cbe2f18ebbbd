//go:build !unix

package bench

import (
	"fmt"
	"runtime"
)

func selfCPUSeconds() (float64, error) {
	return 0, fmt.Errorf("the client's CPU time is not read on %s", runtime.GOOS)
}
