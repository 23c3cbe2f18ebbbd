package netfault

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// iproute2Package provides ip and tc on Debian.
const iproute2Package = "iproute2"

// Available reports nil when networks can be made here (Linux, root, and
// ip and tc on PATH), else an error that says plainly what is missing.
// It never installs anything: a product command must not apt-get.
func Available() error {
	_, _, err := lookTools()
	return err
}

// install is this process's one attempt at installing iproute2.
var install struct {
	once sync.Once
	err  error
}

// Install installs Debian's iproute2 with apt-get when ip or tc is
// missing, for tests, which install what they need rather than skip (a
// product command calls Available instead). On another system, or
// without root, it returns Available's error and installs nothing. A
// failed install is not tried again in the same process.
func Install() error {
	if err := checkPlatform(); err != nil {
		return err
	}
	if _, _, err := findTools(); err == nil {
		return nil
	}
	install.once.Do(func() { install.err = installPackage(iproute2Package) })
	if install.err != nil {
		return fmt.Errorf("network namespaces need the ip and tc commands (Debian package %s): %w", iproute2Package, install.err)
	}
	if _, _, err := findTools(); err != nil {
		return fmt.Errorf("network namespaces need the ip and tc commands; %s is installed but: %w", iproute2Package, err)
	}
	return nil
}

// lookTools returns the paths of ip and tc, or why networks cannot be
// made here.
func lookTools() (ip, tc string, err error) {
	if err := checkPlatform(); err != nil {
		return "", "", err
	}
	if ip, tc, err = findTools(); err != nil {
		return "", "", fmt.Errorf("network namespaces need the ip and tc commands (Debian package %s): %w", iproute2Package, err)
	}
	return ip, tc, nil
}

// checkPlatform checks for Linux and root.
func checkPlatform() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("network faults need Linux network namespaces; this is %s", runtime.GOOS)
	}
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("network faults need root (they make namespaces, links and qdiscs); running as uid %d", uid)
	}
	return nil
}

func findTools() (ip, tc string, err error) {
	var errIP, errTC error
	ip, errIP = exec.LookPath("ip")
	tc, errTC = exec.LookPath("tc")
	return ip, tc, errors.Join(errIP, errTC)
}

// installPackage installs a Debian package, updating the package lists
// first only if the install fails without them (a fresh image has none).
func installPackage(pkg string) error {
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("cannot install %s: no apt-get: %v", pkg, err)
	}
	run := func(args ...string) error {
		cmd := exec.Command(apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			// The last lines say why; apt-get's progress before them
			// does not.
			lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			lines = lines[max(0, len(lines)-20):]
			return fmt.Errorf("apt-get %s: %v\n%s", strings.Join(args, " "), err, strings.Join(lines, "\n"))
		}
		return nil
	}
	if run("install", "-y", "--no-install-recommends", pkg) == nil {
		return nil
	}
	if err := run("update"); err != nil {
		return err
	}
	return run("install", "-y", "--no-install-recommends", pkg)
}

// runFunc runs a command and returns its output; an error names the
// command and carries what it printed. A test replaces it to make the
// setup fail half-way.
type runFunc func(name string, args ...string) ([]byte, error)

func execRun(name string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}
