package tlsconf

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"
)

// fileRole indexes a Store's files, and names them in errors.
type fileRole int

const (
	roleCert fileRole = iota
	roleKey
	roleCA
	numRoles
)

func (r fileRole) String() string {
	switch r {
	case roleCert:
		return "certificate file"
	case roleKey:
		return "key file"
	case roleCA:
		return "CA file"
	}
	panic(fmt.Sprintf("tlsconf: file role %d", int(r)))
}

// paths returns the files by role; "" is a file not configured.
func (f Files) paths() [numRoles]string {
	return [numRoles]string{roleCert: f.CertFile, roleKey: f.KeyFile, roleCA: f.CAFile}
}

func (f Files) validate() error {
	switch {
	case f.CertFile == "" && f.KeyFile != "":
		return errors.New("tlsconf: a key file without a certificate file")
	case f.CertFile != "" && f.KeyFile == "":
		return errors.New("tlsconf: a certificate file without a key file")
	case f.CertFile == "" && f.CAFile == "":
		return errors.New("tlsconf: neither a certificate file nor a CA file")
	}
	return nil
}

// fileStamp is a file as stat sees it (statFile). ok is false when the
// stat failed, so that two checks that both found a file missing compare
// equal.
type fileStamp struct {
	ok       bool
	dev, ino uint64
	size     int64
	mtimeNs  int64
}

// observation is one file as one check saw it. The stat is taken before
// the content is read: a write landing between the two leaves a stamp
// older than the content, so the next check sees a new stamp and reads
// again. The reverse order could pair new content's stamp with old
// content and miss the change for good.
type observation struct {
	stamp   fileStamp
	content []byte
	sum     [sha256.Size]byte // of content
	err     error             // the stat's or the read's
	// statAt is the wall clock (not Options.Now: mtimes come from the
	// kernel's clock) just before the stat; see trustedStamp.
	statAt time.Time
}

func observe(path string) observation {
	o := observation{statAt: time.Now()}
	o.stamp, o.err = statFile(path)
	if o.err == nil {
		o.content, o.err = os.ReadFile(path)
	}
	o.sum = sha256.Sum256(o.content)
	return o
}

// racyWindow bounds the mtime granularity of the file systems Fjord
// expects (ext4 and xfs advance mtime with the kernel's coarse clock, a
// few ms; HFS+ and ext3 by the second; FAT by 2 s).
const racyWindow = 2 * time.Second

// trustedStamp reports whether o's stamp will change if the file is
// written again: only when its mtime is more than racyWindow older than
// the stat, since a write after the stat gets an mtime at least
// (stat time - granularity). An untrusted stamp makes later checks
// compare content until one happens racyWindow after the mtime.
func (o observation) trustedStamp() bool {
	return o.err == nil && o.statAt.Sub(time.Unix(0, o.stamp.mtimeNs)) > racyWindow
}

// parsed is the validated content of one set of files.
type parsed struct {
	cert  *tls.Certificate // nil without CertFile
	roots *x509.CertPool   // nil without CAFile
}

// parseFiles validates one observed set of files: decisions only, the
// bytes and the time in, the credentials or the first problem out.
func parseFiles(paths [numRoles]string, obs *[numRoles]observation, now time.Time) (parsed, error) {
	var p parsed
	for role, path := range paths {
		if path == "" {
			continue
		}
		if err := obs[role].err; err != nil {
			var pathErr *fs.PathError
			if errors.As(err, &pathErr) {
				err = pathErr.Err // the path is in the message already
			}
			if errors.Is(err, fs.ErrNotExist) {
				err = fs.ErrNotExist // "file does not exist", not "no such file or directory"
			}
			return parsed{}, fileError(fileRole(role), path, err)
		}
	}
	if paths[roleCert] != "" {
		chain, err := parseCertificates(obs[roleCert].content)
		if err != nil {
			return parsed{}, fileError(roleCert, paths[roleCert], err)
		}
		for i, c := range chain {
			if err := checkValidity(c, now); err != nil {
				return parsed{}, fileError(roleCert, paths[roleCert], fmt.Errorf("%w (certificate %d of the chain, %s)", err, i+1, c.Subject))
			}
		}
		key, err := parsePrivateKey(obs[roleKey].content)
		if err != nil {
			return parsed{}, fileError(roleKey, paths[roleKey], err)
		}
		pub, ok := chain[0].PublicKey.(interface{ Equal(crypto.PublicKey) bool })
		if !ok || !pub.Equal(key.Public()) {
			return parsed{}, fileError(roleKey, paths[roleKey], fmt.Errorf("%w %s", ErrKeyMismatch, paths[roleCert]))
		}
		p.cert = &tls.Certificate{PrivateKey: key, Leaf: chain[0]}
		for _, c := range chain {
			p.cert.Certificate = append(p.cert.Certificate, c.Raw)
		}
	}
	if paths[roleCA] != "" {
		// Expired certificates in a trust store are left in: bundles
		// carry them, and verification ignores a root that cannot chain.
		certs, err := parseCertificates(obs[roleCA].content)
		if err != nil {
			return parsed{}, fileError(roleCA, paths[roleCA], err)
		}
		p.roots = x509.NewCertPool()
		for _, c := range certs {
			p.roots.AddCert(c)
		}
	}
	return p, nil
}

func fileError(role fileRole, path string, err error) error {
	return fmt.Errorf("tlsconf: %s %s: %w", role, path, err)
}

// pemBlocks decodes every PEM block of data. It refuses data in which a
// "-----BEGIN" line did not yield a block: pem.Decode skips such text
// silently, and a file read halfway through an in-place write ends in
// exactly that, a chain cut after its leaf that would otherwise load.
func pemBlocks(data []byte) ([]*pem.Block, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w (the file is empty)", ErrNotPEM)
	}
	var blocks []*pem.Block
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		blocks = append(blocks, b)
	}
	begins := bytes.Count(data, []byte("-----BEGIN "))
	switch {
	case begins == 0:
		return nil, ErrNotPEM
	case len(blocks) < begins:
		return nil, fmt.Errorf("%d of %d PEM blocks are truncated or malformed", begins-len(blocks), begins)
	}
	return blocks, nil
}

// parseCertificates returns the CERTIFICATE blocks of data, in order
// (leaf first, for a chain). Other blocks are skipped, so that one file
// holding both a certificate and its key can be both CertFile and
// KeyFile.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	blocks, err := pemBlocks(data)
	if err != nil {
		return nil, err
	}
	var certs []*x509.Certificate
	for _, b := range blocks {
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(certs)+1, err)
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, ErrNoCertificates
	}
	return certs, nil
}

func checkValidity(c *x509.Certificate, now time.Time) error {
	switch {
	case now.After(c.NotAfter):
		return fmt.Errorf("%w at %s", ErrCertificateExpired, c.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(c.NotBefore):
		return fmt.Errorf("%w (valid from %s)", ErrCertificateNotYetValid, c.NotBefore.UTC().Format(time.RFC3339))
	}
	return nil
}

// parsePrivateKey returns the first private key of data: PKCS #8
// ("PRIVATE KEY"), SEC 1 ("EC PRIVATE KEY") or PKCS #1 ("RSA PRIVATE
// KEY"), of a type crypto/tls can sign with.
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	blocks, err := pemBlocks(data)
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		if strings.Contains(b.Headers["Proc-Type"], "ENCRYPTED") {
			return nil, errors.New("encrypted private keys are not supported (Kafka's ssl.key.password has no equivalent)")
		}
		var key any
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "ENCRYPTED PRIVATE KEY":
			return nil, errors.New("encrypted private keys are not supported (Kafka's ssl.key.password has no equivalent)")
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s block: %w", b.Type, err)
		}
		switch k := key.(type) {
		case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
			return k.(crypto.Signer), nil
		}
		return nil, fmt.Errorf("a %T cannot sign TLS handshakes", key)
	}
	return nil, ErrNoPrivateKey
}
