package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// fjord user against the shared node. SCRAM users are cluster-wide
// state, so each test starts and ends with none (clearScramUsers).

// clearScramUsers deletes every SCRAM credential on the shared node,
// with a client of the test's own rather than the commands under test.
func clearScramUsers(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(rdClient(t))
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatalf("describing SCRAM users: %v", err)
	}
	for _, d := range described {
		// One request per credential: a user named twice in one
		// request is refused.
		for _, c := range d.CredInfos {
			res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: d.User, Mechanism: c.Mechanism}}, nil)
			if err == nil {
				err = res.Error()
			}
			if err != nil {
				t.Fatalf("deleting the %s credential of %s: %v", c.Mechanism, d.User, err)
			}
		}
	}
}

// userRows runs user list and returns its table's rows, each its three
// columns (the names here hold no spaces).
func userRows(t *testing.T) [][]string {
	t.Helper()
	out := ok(t, "", "user", "list").stdout
	if out == "No SCRAM users.\n" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"USER", "MECHANISM", "ITERATIONS"}) {
		t.Fatalf("user list: header %q\n%s", got, out)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func wantUserRows(t *testing.T, want ...string) {
	t.Helper()
	var w [][]string
	for _, row := range want {
		w = append(w, strings.Fields(row))
	}
	if got := userRows(t); !slices.EqualFunc(got, w, slices.Equal) {
		t.Fatalf("user list shows\n%q\nwant\n%q", got, w)
	}
}

// Reference: KIP-554. Create (password from stdin and from a file, each
// mechanism, a new password replacing the old), list (text and JSON),
// delete (one mechanism, every one), and the node's refusals in one line.
func TestUserCreateListDelete(t *testing.T) {
	clearScramUsers(t)
	t.Cleanup(func() { clearScramUsers(t) })

	if r := ok(t, "", "user", "list"); r.stdout != "No SCRAM users.\n" {
		t.Fatalf("list with no users:\n%s", r.stdout)
	}
	if r := ok(t, "", "user", "list", "-o", "json"); r.stdout != "{\n  \"users\": []\n}\n" {
		t.Fatalf("list -o json with no users:\n%s", r.stdout)
	}

	r := ok(t, "alice-secret\n", "user", "create", "alice")
	if want := "created the SCRAM-SHA-512 credential of user alice (4096 iterations)\n"; r.stdout != want {
		t.Fatalf("create printed %q, want %q", r.stdout, want)
	}
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("file-secret\r\nnot the password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = ok(t, "", "user", "create", "alice", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192", "--password-file", pw)
	if want := "created the SCRAM-SHA-256 credential of user alice (8192 iterations)\n"; r.stdout != want {
		t.Fatalf("create printed %q, want %q", r.stdout, want)
	}
	// A new password for a mechanism the user has replaces it; stdin
	// without a line end is the line.
	r = ok(t, "new-secret", "user", "create", "alice", "--iterations", "16384")
	if want := "replaced the SCRAM-SHA-512 credential of user alice (16384 iterations)\n"; r.stdout != want {
		t.Fatalf("create again printed %q, want %q", r.stdout, want)
	}
	// A name a table could misread is quoted.
	r = ok(t, "pw\n", "user", "create", "carol,ops")
	if want := `created the SCRAM-SHA-512 credential of user "carol,ops" (4096 iterations)` + "\n"; r.stdout != want {
		t.Fatalf("create printed %q, want %q", r.stdout, want)
	}
	wantUserRows(t,
		"alice SCRAM-SHA-256 8192",
		"alice SCRAM-SHA-512 16384",
		`"carol,ops" SCRAM-SHA-512 4096`)

	// JSON: the documented fields, users sorted, SCRAM-SHA-256 first.
	out := ok(t, "", "user", "list", "-o", "json").stdout
	doc := decodeJSON(t, out)
	wantKeys(t, "list -o json", doc, "users")
	users := list(t, doc["users"])
	for i, u := range users {
		m := wantKeys(t, fmt.Sprintf("users[%d]", i), u, "user", "credentials")
		for j, c := range list(t, m["credentials"]) {
			wantKeys(t, fmt.Sprintf("users[%d].credentials[%d]", i, j), c, "mechanism", "iterations")
		}
	}
	var typed userReport
	if err := json.Unmarshal([]byte(out), &typed); err != nil {
		t.Fatal(err)
	}
	want := userReport{Users: []userEntry{
		{User: "alice", Credentials: []userCredential{{"SCRAM-SHA-256", 8192}, {"SCRAM-SHA-512", 16384}}},
		{User: "carol,ops", Credentials: []userCredential{{"SCRAM-SHA-512", 4096}}},
	}}
	if !slices.EqualFunc(typed.Users, want.Users, func(a, b userEntry) bool { return a.User == b.User && slices.Equal(a.Credentials, b.Credentials) }) {
		t.Fatalf("list -o json = %+v, want %+v", typed, want)
	}

	// Deleting one mechanism, then the same again: the node's refusal.
	r = ok(t, "", "user", "delete", "alice", "--mechanism", "SCRAM-SHA-256")
	if want := "deleted the SCRAM-SHA-256 credential of user alice\n"; r.stdout != want {
		t.Fatalf("delete printed %q, want %q", r.stdout, want)
	}
	fails(t, "deleting the SCRAM-SHA-256 credential of user alice: RESOURCE_NOT_FOUND", "user", "delete", "alice", "--mechanism", "SCRAM-SHA-256", "--brokers", brokers(t))
	// Every mechanism the user has.
	ok(t, "pw\n", "user", "create", "alice", "--mechanism", "SCRAM-SHA-256")
	r = ok(t, "", "user", "delete", "alice")
	if want := "deleted the SCRAM-SHA-256 and SCRAM-SHA-512 credentials of user alice\n"; r.stdout != want {
		t.Fatalf("delete printed %q, want %q", r.stdout, want)
	}
	fails(t, "user alice has no SCRAM credentials; nothing deleted", "user", "delete", "alice", "--brokers", brokers(t))
	wantUserRows(t, `"carol,ops" SCRAM-SHA-512 4096`)
}

// Bad input: one line each, refused before anything is sent (to a port
// nothing listens on: a check left to the node would fail there as
// "cannot reach").
func TestUserBadInput(t *testing.T) {
	nowhere := closedPort(t)
	dir := t.TempDir()
	long := filepath.Join(dir, "long")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(long, []byte(strings.Repeat("p", maxPasswordBytes+1)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		want string
		args []string
	}{
		{`user name "": the user name is empty`, []string{"create", ""}},
		{`user name "": the user name is empty`, []string{"delete", ""}},
		{"a user name of 1025 bytes (at most 1024)", []string{"create", strings.Repeat("u", 1025)}},
		{"the user name is not valid UTF-8", []string{"create", "\xff"}},
		{`invalid argument "SCRAM-SHA-1" for "--mechanism" flag: allowed: SCRAM-SHA-512, SCRAM-SHA-256`, []string{"create", "alice", "--mechanism", "SCRAM-SHA-1"}},
		{`invalid argument "PLAIN" for "--mechanism" flag: allowed: SCRAM-SHA-512, SCRAM-SHA-256`, []string{"delete", "alice", "--mechanism", "PLAIN"}},
		{`"--iterations" flag: allowed: an integer from 4096 to 16384`, []string{"create", "alice", "--iterations", "4095"}},
		{`"--iterations" flag: allowed: an integer from 4096 to 16384`, []string{"create", "alice", "--iterations", "16385"}},
		{`"--iterations" flag: allowed: an integer from 4096 to 16384`, []string{"create", "alice", "--iterations", "lots"}},
		{"--password-file: open /nonexistent/pw: no such file or directory", []string{"create", "alice", "--password-file", "/nonexistent/pw"}},
		{"the password is longer than 4096 bytes", []string{"create", "alice", "--password-file", long}},
		{"the password is empty", []string{"create", "alice", "--password-file", empty}},
		// fails gives no stdin: no password.
		{"password from stdin: the password is empty (give it as one line, or use --password-file)", []string{"create", "alice"}},
		{"accepts 1 arg(s), received 0", []string{"create"}},
		{"accepts 1 arg(s), received 2", []string{"delete", "alice", "bob"}},
		{`unknown flag: --password`, []string{"create", "alice", "--password", "secret"}},
	} {
		fails(t, c.want, append(append([]string{"user"}, c.args...), "--brokers", nowhere)...)
	}
}

// The password is the first line, without its line end; nothing after
// it is read.
func TestReadPasswordLine(t *testing.T) {
	for in, want := range map[string]string{
		"pw\n":          "pw",
		"pw\r\n":        "pw",
		"pw":            "pw",
		"pw\nrest\n":    "pw",
		" spaced pw \n": " spaced pw ",
		"p\rw\n":        "p\rw",
		"pässwörd\n":    "pässwörd",
		strings.Repeat("p", maxPasswordBytes) + "\n": strings.Repeat("p", maxPasswordBytes),
	} {
		if got, err := readPasswordLine(strings.NewReader(in)); err != nil || got != want {
			t.Errorf("readPasswordLine(%.20q) = %.20q, %v; want %.20q", in, got, err, want)
		}
	}
	for in, msg := range map[string]string{
		"":                                      "empty",
		"\n":                                    "empty",
		"\r\n":                                  "empty",
		strings.Repeat("p", maxPasswordBytes+1): "longer than 4096 bytes",
		strings.Repeat("p", 1<<20) + "\n":       "longer than 4096 bytes",
	} {
		if _, err := readPasswordLine(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("readPasswordLine(%.20q) = %v, want an error saying %q", in, err, msg)
		}
	}
	// One line read, no more: the rest of stdin is the caller's.
	r := strings.NewReader("pw\n" + strings.Repeat("x", 1<<20))
	if _, err := readPasswordLine(r); err != nil || r.Len() < 1<<19 {
		t.Fatalf("read %d bytes past the line: %v", (1<<20)+3-r.Len(), err)
	}
}
