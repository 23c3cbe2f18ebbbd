package httpapi_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The curl examples in README.md, run in order against a fresh node:
// each must succeed (curl --fail-with-body exits non-zero on an error
// status) and answer JSON (Prometheus text for /metrics).
func TestReadmeCurlExamples(t *testing.T) {
	curl := ensureCurl(t)
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "<!-- http-examples:begin -->")
	block, _, ok2 := strings.Cut(rest, "<!-- http-examples:end -->")
	if !ok || !ok2 {
		t.Fatal("README.md has no http-examples block")
	}
	e := newEnv(t)
	n := 0
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		n++
		cmd := exec.Command("sh", "-c", strings.Replace(line, "curl ", curl+" ", 1))
		cmd.Env = append(os.Environ(), "FJORD_HTTP="+e.base)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s\n%v: %s", line, err, out)
		}
		if strings.Contains(line, "/metrics") {
			if !strings.Contains(string(out), "fjord_kafka_requests_total") {
				t.Fatalf("%s: no Fjord metrics in %.200s", line, out)
			}
			continue
		}
		if !json.Valid(out) {
			t.Fatalf("%s: not JSON: %.300s", line, out)
		}
	}
	if n < 15 {
		t.Fatalf("only %d curl examples found", n)
	}
}

// ensureCurl returns curl's path, installing it from Debian's packages
// when it is missing and the test runs as root (as CI does).
func ensureCurl(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("curl"); err == nil {
		return p
	}
	if os.Geteuid() != 0 {
		t.Fatal("curl is not installed: apt-get install -y curl")
	}
	for _, args := range [][]string{{"apt-get", "update"}, {"apt-get", "install", "-y", "curl"}} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	p, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
