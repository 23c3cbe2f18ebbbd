package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func parsePEMCert(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("not a PEM certificate: %q", certPEM)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCAIssue(t *testing.T) {
	ca := newTestCA(t, "Fjord dev CA")
	caCert := parsePEMCert(t, ca.CertPEM())
	if !caCert.IsCA || caCert.Subject.CommonName != "Fjord dev CA" || caCert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("CA certificate: IsCA %v, CN %q, key %v", caCert.IsCA, caCert.Subject.CommonName, caCert.PublicKeyAlgorithm)
	}
	if key, ok := caCert.PublicKey.(*ecdsa.PublicKey); !ok || key.Curve != elliptic.P256() {
		t.Errorf("CA key %T, want ECDSA P-256", caCert.PublicKey)
	}
	roots := x509.NewCertPool()
	roots.AddCert(caCert)

	certPEM, keyPEM := issue(t, ca, IssueOptions{CommonName: "broker-1", DNSNames: []string{"broker-1.local"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}, Server: true, Client: true})
	leaf := parsePEMCert(t, certPEM)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "broker-1.local", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("usage %v: %v", usage, err)
		}
	}
	if err := leaf.VerifyHostname("10.0.0.1"); err != nil {
		t.Error(err)
	}
	if leaf.Subject.CommonName != "broker-1" || leaf.SerialNumber.Sign() <= 0 {
		t.Errorf("leaf: CN %q, serial %v", leaf.Subject.CommonName, leaf.SerialNumber)
	}
	if _, err := parsePrivateKey(keyPEM); err != nil {
		t.Errorf("key: %v", err)
	}

	// A client-only certificate does not serve.
	clientPEM, _ := issue(t, ca, IssueOptions{CommonName: "alice", Client: true})
	if _, err := parsePEMCert(t, clientPEM).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verifies for server auth")
	}

	// Validity as asked, for expired-certificate tests.
	start := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	oldPEM, _ := issue(t, ca, IssueOptions{CommonName: "old", Client: true, NotBefore: start, ValidFor: time.Hour})
	if old := parsePEMCert(t, oldPEM); !old.NotBefore.Equal(start) || !old.NotAfter.Equal(start.Add(time.Hour)) {
		t.Errorf("validity %v to %v, want %v for an hour", old.NotBefore, old.NotAfter, start)
	}

	if _, _, err := ca.Issue(IssueOptions{CommonName: "nothing"}); err == nil {
		t.Error("Issue without Client or Server succeeded")
	}
	if _, err := NewCA("x", 0); err == nil {
		t.Error("NewCA with no validity succeeded")
	}
}

func TestWriteFiles(t *testing.T) {
	ca := newTestCA(t, "ca")
	dir := filepath.Join(t.TempDir(), "tls") // created by WriteFiles
	certPEM, keyPEM := issueServer(t, ca)
	files := writeFiles(t, dir, "broker", certPEM, keyPEM)
	if files.CertFile != filepath.Join(dir, "broker.crt") || files.KeyFile != filepath.Join(dir, "broker.key") {
		t.Errorf("files %+v", files)
	}
	for path, mode := range map[string]os.FileMode{files.CertFile: 0o644, files.KeyFile: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, want %v", path, fi.Mode().Perm(), mode)
		}
	}
	// Overwriting leaves no temporary file behind, and replaces by
	// rename (a new inode).
	before, _ := statFile(files.CertFile)
	writeFiles(t, dir, "broker", certPEM, keyPEM)
	after, _ := statFile(files.CertFile)
	if before.ino == after.ino && before.ino != 0 {
		t.Error("rewritten in place, not replaced")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d entries, want 2", len(entries))
	}
	// A certificate alone (a CA file).
	if caFiles := writeFiles(t, dir, "ca", ca.CertPEM(), nil); caFiles.KeyFile != "" {
		t.Errorf("CA files %+v", caFiles)
	}
	if _, err := Load(Files{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: filepath.Join(dir, "ca.crt")}, Options{}); err != nil {
		t.Error(err)
	}
}

// TestLoadCA: `fjord dev` reuses the CA it wrote before, so certificates
// it issues after a restart verify against the CA file clients have.
func TestLoadCA(t *testing.T) {
	ca := newTestCA(t, "ca")
	dir := t.TempDir()
	files := writeFiles(t, dir, "ca", ca.CertPEM(), ca.KeyPEM())
	loaded, err := LoadCA(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.Certificate().Equal(ca.Certificate()) {
		t.Error("loaded another certificate")
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	certPEM, _ := issue(t, loaded, IssueOptions{CommonName: "after restart", Server: true})
	if _, err := parsePEMCert(t, certPEM).Verify(x509.VerifyOptions{Roots: roots}); err != nil {
		t.Errorf("issued by the loaded CA: %v", err)
	}

	other := newTestCA(t, "other")
	leafPEM, leafKey := issueServer(t, ca)
	for name, f := range map[string]Files{
		"mismatched key": writeFiles(t, filepath.Join(dir, "mismatch"), "ca", ca.CertPEM(), other.KeyPEM()),
		"not a CA":       writeFiles(t, filepath.Join(dir, "leaf"), "ca", leafPEM, leafKey),
		"missing":        {CertFile: filepath.Join(dir, "none.crt"), KeyFile: files.KeyFile},
	} {
		if _, err := LoadCA(f.CertFile, f.KeyFile); err == nil {
			t.Errorf("%s: LoadCA succeeded", name)
		}
	}
}
