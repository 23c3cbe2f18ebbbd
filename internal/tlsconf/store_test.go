package tlsconf

import (
	"crypto/tls"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLoadErrors(t *testing.T) {
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	goodPEM, goodKeyPEM := issueServer(t, ca)
	good := writeFiles(t, dir, "good", goodPEM, goodKeyPEM)
	otherCert, _ := issue(t, ca, serverOptions())
	expiredCert, expiredKey := issue(t, ca, IssueOptions{CommonName: "old", Server: true, NotBefore: time.Now().Add(-2 * time.Hour), ValidFor: time.Hour})
	futureCert, futureKey := issue(t, ca, IssueOptions{CommonName: "new", Server: true, NotBefore: time.Now().Add(time.Hour)})
	goodCert, _ := os.ReadFile(good.CertFile)
	goodKey, _ := os.ReadFile(good.KeyFile)
	file := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		writeFile(t, path, data)
		return path
	}
	garbage := file("garbage", []byte("this is not a certificate\n"))
	empty := file("empty", nil)
	encryptedKey := file("encrypted.key", []byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"))
	truncated := file("truncated.crt", append(append([]byte{}, goodCert...), ca.CertPEM()[:100]...))
	missing := filepath.Join(dir, "missing.crt")

	for _, tc := range []struct {
		name  string
		files Files
		is    error  // errors.Is
		path  string // named in the message
	}{
		{"missing certificate", Files{CertFile: missing, KeyFile: good.KeyFile}, fs.ErrNotExist, missing},
		{"missing key", Files{CertFile: good.CertFile, KeyFile: missing}, fs.ErrNotExist, missing},
		{"missing CA file", Files{CAFile: missing}, fs.ErrNotExist, missing},
		{"garbage certificate", Files{CertFile: garbage, KeyFile: good.KeyFile}, ErrNotPEM, garbage},
		{"empty certificate", Files{CertFile: empty, KeyFile: good.KeyFile}, ErrNotPEM, empty},
		{"garbage key", Files{CertFile: good.CertFile, KeyFile: garbage}, ErrNotPEM, garbage},
		{"key file holds a certificate", Files{CertFile: good.CertFile, KeyFile: good.CertFile}, ErrNoPrivateKey, good.CertFile},
		{"certificate file holds a key", Files{CertFile: good.KeyFile, KeyFile: good.KeyFile}, ErrNoCertificates, good.KeyFile},
		{"mismatched key", Files{CertFile: file("other.crt", otherCert), KeyFile: good.KeyFile}, ErrKeyMismatch, good.KeyFile},
		{"expired certificate", Files{CertFile: file("expired.crt", expiredCert), KeyFile: file("expired.key", expiredKey)}, ErrCertificateExpired, "expired.crt"},
		{"certificate not yet valid", Files{CertFile: file("future.crt", futureCert), KeyFile: file("future.key", futureKey)}, ErrCertificateNotYetValid, "future.crt"},
		{"empty CA file", Files{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: empty}, ErrNotPEM, empty},
		{"CA file without certificates", Files{CertFile: good.CertFile, KeyFile: good.KeyFile, CAFile: good.KeyFile}, ErrNoCertificates, good.KeyFile},
		{"garbage CA file", Files{CAFile: garbage}, ErrNotPEM, garbage},
		{"encrypted key", Files{CertFile: good.CertFile, KeyFile: encryptedKey}, nil, encryptedKey},
		{"truncated chain", Files{CertFile: truncated, KeyFile: good.KeyFile}, nil, truncated},
		{"key without certificate", Files{KeyFile: good.KeyFile, CAFile: good.CertFile}, nil, ""},
		{"certificate without key", Files{CertFile: good.CertFile}, nil, ""},
		{"nothing", Files{}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Load(tc.files, Options{})
			if err == nil {
				t.Fatalf("Load = %v, want an error", s)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("Load: %v, want %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("Load: %v, want the file %s named", err, tc.path)
			}
			t.Log(err)
		})
	}

	// And what does load: a trust store alone, and one file holding
	// both the certificate and its key.
	if _, err := Load(Files{CAFile: good.CertFile}, Options{}); err != nil {
		t.Errorf("CA file only: %v", err)
	}
	both := file("both.pem", append(append([]byte{}, goodKey...), goodCert...))
	if _, err := Load(Files{CertFile: both, KeyFile: both}, Options{}); err != nil {
		t.Errorf("certificate and key in one file: %v", err)
	}
}

func issueServer(t *testing.T, ca *CA) (certPEM, keyPEM []byte) {
	t.Helper()
	return issue(t, ca, serverOptions())
}

// TestRotation: the rotation shapes of the package documentation. After
// each, the first handshake past the check interval gets the new
// certificate, and a connection opened before keeps working.
func TestRotation(t *testing.T) {
	for _, shape := range []struct {
		name  string
		write func(t *testing.T, files Files, certPEM, keyPEM []byte)
	}{
		{"rename", func(t *testing.T, files Files, certPEM, keyPEM []byte) {
			writeFiles(t, filepath.Dir(files.CertFile), "broker", certPEM, keyPEM)
		}},
		{"in place", func(t *testing.T, files Files, certPEM, keyPEM []byte) {
			writeInPlace(t, files.CertFile, certPEM)
			writeInPlace(t, files.KeyFile, keyPEM)
		}},
		// A symlink swap: TestRotationSymlinkSwap.
	} {
		t.Run(shape.name, func(t *testing.T) {
			ca := newTestCA(t, "ca")
			files, firstPEM := serverFiles(t, ca)
			ts := loadTestStore(t, files)
			es := startEchoServer(t, ts.ServerConfig(ClientAuthNone))
			old := mustDial(t, es, clientConfig(t, ca, nil, nil))
			if got, want := peerSerial(old), serialOf(t, firstPEM); got.Cmp(want) != 0 {
				t.Fatalf("serial %v, want %v", got, want)
			}

			secondPEM, secondKey := issueServer(t, ca)
			shape.write(t, files, secondPEM, secondKey)
			// Within the check interval the files are not looked at.
			if got := peerSerial(mustDial(t, es, clientConfig(t, ca, nil, nil))); got.Cmp(serialOf(t, firstPEM)) != 0 {
				t.Errorf("before the interval: serial %v, want the first %v", got, serialOf(t, firstPEM))
			}
			ts.tick()
			if got := peerSerial(mustDial(t, es, clientConfig(t, ca, nil, nil))); got.Cmp(serialOf(t, secondPEM)) != 0 {
				t.Errorf("after the interval: serial %v, want the second %v", got, serialOf(t, secondPEM))
			}
			if err := echo(old, "still there"); err != nil {
				t.Errorf("connection opened before the rotation: %v", err)
			}
			if reloads, failures := ts.counts(); reloads != 1 || len(failures) != 0 {
				t.Errorf("reloads %d, failures %v; want 1, none", reloads, failures)
			}
		})
	}
}

// TestRotationSymlinkSwap is Kubernetes' update of a mounted Secret: the
// files are links through a "..data" link, swapped by rename to a new
// directory.
func TestRotationSymlinkSwap(t *testing.T) {
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	firstPEM, firstKey := issueServer(t, ca)
	writeFiles(t, filepath.Join(dir, "v1"), "tls", firstPEM, firstKey)
	link := func(target, name string) {
		t.Helper()
		tmp := filepath.Join(dir, name+".tmp")
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("v1", "..data")
	link("..data/tls.crt", "tls.crt")
	link("..data/tls.key", "tls.key")
	ts := loadTestStore(t, Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")})
	es := startEchoServer(t, ts.ServerConfig(ClientAuthNone))

	secondPEM, secondKey := issueServer(t, ca)
	writeFiles(t, filepath.Join(dir, "v2"), "tls", secondPEM, secondKey)
	link("v2", "..data")
	ts.tick()
	if got := peerSerial(mustDial(t, es, clientConfig(t, ca, nil, nil))); got.Cmp(serialOf(t, secondPEM)) != 0 {
		t.Errorf("serial %v, want the second %v", got, serialOf(t, secondPEM))
	}
}

// TestRotationHalfWritten: the certificate is replaced before its key.
// The old pair stays until both match; the mismatch is reported once,
// not at every check.
func TestRotationHalfWritten(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, firstPEM := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthNone))

	secondPEM, secondKey := issueServer(t, ca)
	writeFiles(t, filepath.Dir(files.CertFile), "broker", secondPEM, nil) // the certificate alone
	for range 3 {
		ts.tick()
		if got := peerSerial(mustDial(t, es, clientConfig(t, ca, nil, nil))); got.Cmp(serialOf(t, firstPEM)) != 0 {
			t.Fatalf("serial %v, want the first %v while the key is old", got, serialOf(t, firstPEM))
		}
	}
	reloads, failures := ts.counts()
	if reloads != 0 || len(failures) != 1 || !errors.Is(failures[0], ErrKeyMismatch) {
		t.Fatalf("reloads %d, failures %v; want 0, one ErrKeyMismatch", reloads, failures)
	}

	writeInPlace(t, files.KeyFile, secondKey)
	ts.tick()
	if got := peerSerial(mustDial(t, es, clientConfig(t, ca, nil, nil))); got.Cmp(serialOf(t, secondPEM)) != 0 {
		t.Errorf("serial %v, want the second %v", got, serialOf(t, secondPEM))
	}
	if reloads, failures := ts.counts(); reloads != 1 || len(failures) != 1 {
		t.Errorf("reloads %d, failures %d; want 1, 1", reloads, len(failures))
	}
}

// TestRotationRetriesUnchangedFailure: a set refused for a reason that
// time fixes (a certificate not yet valid) is retried at every check,
// and taken once valid, without a second report.
func TestRotationRetriesUnchangedFailure(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthNone))
	client := clientConfig(t, ca, nil, nil)
	client.Time = ts.clock.Now // the client's clock is the test's too

	nextPEM, nextKey := issue(t, ca, IssueOptions{CommonName: "broker", IPs: serverOptions().IPs, Server: true, NotBefore: ts.clock.Now().Add(time.Minute)})
	writeFiles(t, filepath.Dir(files.CertFile), "broker", nextPEM, nextKey)
	ts.tick()
	mustDial(t, es, client)
	if _, failures := ts.counts(); len(failures) != 1 || !errors.Is(failures[0], ErrCertificateNotYetValid) {
		t.Fatalf("failures %v, want one ErrCertificateNotYetValid", failures)
	}
	ts.clock.Advance(time.Minute)
	if got := peerSerial(mustDial(t, es, client)); got.Cmp(serialOf(t, nextPEM)) != 0 {
		t.Errorf("serial %v, want the next %v once valid", got, serialOf(t, nextPEM))
	}
	if reloads, failures := ts.counts(); reloads != 1 || len(failures) != 1 {
		t.Errorf("reloads %d, failures %d; want 1, 1", reloads, len(failures))
	}
}

// TestRotationCAFile: a client certificate of a CA added to the CA file
// is accepted by the next handshake after the check.
func TestRotationCAFile(t *testing.T) {
	ca := newTestCA(t, "ca")
	newCA := newTestCA(t, "new-ca")
	files, _ := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthRequired))
	certPEM, keyPEM := issue(t, newCA, IssueOptions{CommonName: "bob", Client: true})

	if _, err := dial(t, es, clientConfig(t, ca, certPEM, keyPEM)); err == nil {
		t.Fatal("accepted a client of a CA not yet trusted")
	}
	es.handshakeErr(t)

	writeInPlace(t, files.CAFile, append(append([]byte{}, ca.CertPEM()...), newCA.CertPEM()...))
	ts.tick()
	mustDial(t, es, clientConfig(t, ca, certPEM, keyPEM))
	if p, ok := Principal(es.state(t)); p != "User:CN=bob" || !ok {
		t.Errorf("principal %q, %v; want User:CN=bob", p, ok)
	}
}

// TestRotationSameStat: a file rewritten in place with the same size
// and mtime as when loaded (two writes within the mtime granularity)
// differs only in content. The load happened within racyWindow of the
// mtime, so checks compare content too, and see it.
func TestRotationSameStat(t *testing.T) {
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	// Two certificates of one length: ECDSA signatures and serials vary
	// by a byte or two, so a few tries find a pair. P-256 keys in PKCS #8
	// are all one length.
	firstPEM, firstKey := issueServer(t, ca)
	var secondPEM, secondKey []byte
	for try := 0; len(secondPEM) != len(firstPEM); try++ {
		if try == 200 {
			t.Fatal("no two certificates of one length")
		}
		secondPEM, secondKey = issueServer(t, ca)
	}
	if len(secondKey) != len(firstKey) {
		t.Fatalf("key lengths %d, %d", len(firstKey), len(secondKey))
	}
	files := writeFiles(t, dir, "broker", firstPEM, firstKey)
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthNone))

	for _, f := range []struct {
		path string
		data []byte
	}{{files.CertFile, secondPEM}, {files.KeyFile, secondKey}} {
		before, err := os.Stat(f.path)
		if err != nil {
			t.Fatal(err)
		}
		writeInPlace(t, f.path, f.data)
		if err := os.Chtimes(f.path, before.ModTime(), before.ModTime()); err != nil {
			t.Fatal(err)
		}
		if st, _ := statFile(f.path); st != ts.mu.seen[roleFor(files, f.path)].stamp {
			t.Fatalf("%s: stat changed; the test needs it unchanged", f.path)
		}
	}
	ts.tick()
	if got := peerSerial(mustDial(t, es, clientConfig(t, ca, nil, nil))); got.Cmp(serialOf(t, secondPEM)) != 0 {
		t.Errorf("serial %v, want the second %v", got, serialOf(t, secondPEM))
	}
}

func roleFor(files Files, path string) fileRole {
	for role, p := range files.paths() {
		if p == path {
			return fileRole(role)
		}
	}
	panic(path)
}

// TestStatTrustedAfterRacyWindow: a file whose mtime is older than
// racyWindow when read is trusted by stat alone.
func TestStatTrustedAfterRacyWindow(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	old := time.Now().Add(-time.Hour)
	for _, path := range files.paths() {
		if err := os.Chtimes(path, old, old); err != nil {
			t.Fatal(err)
		}
	}
	ts := loadTestStore(t, files)
	for role, seen := range ts.mu.seen {
		if !seen.trusted {
			t.Errorf("%v: not trusted", fileRole(role))
		}
	}
	// Freshly written files are not, until a check long enough after.
	files2, _ := serverFiles(t, ca)
	ts2 := loadTestStore(t, files2)
	if ts2.mu.seen[roleCert].trusted {
		t.Error("a file written just now is trusted")
	}
}

// TestConcurrentHandshakesDuringRotation runs handshakes from several
// goroutines while the files rotate and the clock moves (for the race
// detector): every handshake completes, with one of the certificates.
func TestConcurrentHandshakesDuringRotation(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, firstPEM := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthNone))
	secondPEM, secondKey := issueServer(t, ca)
	serials := map[string]bool{serialOf(t, firstPEM).String(): true, serialOf(t, secondPEM).String(): true}

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	client := clientConfig(t, ca, nil, nil)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: testTimeout}, "tcp", es.addr, client)
				if err != nil {
					errs <- err
					return
				}
				if s := peerSerial(conn).String(); !serials[s] {
					errs <- errors.New("unknown serial " + s)
				}
				conn.Close()
				ts.tick()
			}
		}()
	}
	writeFiles(t, filepath.Dir(files.CertFile), "broker", secondPEM, secondKey)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if _, failures := ts.counts(); len(failures) > 1 {
		t.Errorf("failures %v", failures)
	}
}

// TestCheckAfterClockStepsBack: a wall clock set back (NTP, an operator)
// does not stop reloads until it catches up with the last check.
func TestCheckAfterClockStepsBack(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	start := time.Now()
	now := start
	var nowMu sync.Mutex
	s, err := Load(files, Options{Now: func() time.Time {
		nowMu.Lock()
		defer nowMu.Unlock()
		return now
	}})
	if err != nil {
		t.Fatal(err)
	}
	es := startEchoServer(t, s.ServerConfig(ClientAuthNone))
	nextPEM, nextKey := issueServer(t, ca)
	writeFiles(t, filepath.Dir(files.CertFile), "broker", nextPEM, nextKey)
	nowMu.Lock()
	now = start.Add(-2 * defaultCheckInterval) // back, not forward
	nowMu.Unlock()
	if got := peerSerial(mustDial(t, es, clientConfig(t, ca, nil, nil))); got.Cmp(serialOf(t, nextPEM)) != 0 {
		t.Errorf("serial %v, want the new %v", got, serialOf(t, nextPEM))
	}
}
