//go:build unix

package bench

import "syscall"

// selfCPUSeconds returns the user plus system CPU time this process has
// used, its waited-for children excluded.
func selfCPUSeconds() (float64, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9, nil
}
