package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// KcatPath returns kcat's path, installing Debian's package first when it
// is missing and the test runs as root. Never skips: without kcat the test
// fails and says how to get it.
func KcatPath(t testing.TB) string {
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
