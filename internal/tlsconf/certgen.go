package tlsconf

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a small certificate authority for tests and `fjord dev --tls`:
// an ECDSA P-256 self-signed root that issues leaf certificates
// directly (no intermediates; MaxPathLen 0). It is not meant to run a
// production PKI: no revocation, no serial bookkeeping, keys in files.
type CA struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// clockSkew backdates NotBefore when none is given, so a peer whose
// clock is a little behind does not refuse a certificate issued a
// moment ago.
const clockSkew = 5 * time.Minute

// defaultLeafValidity is IssueOptions' ValidFor when zero.
const defaultLeafValidity = 365 * 24 * time.Hour

// NewCA returns a new CA whose certificate is valid for validFor.
func NewCA(commonName string, validFor time.Duration) (*CA, error) {
	if validFor <= 0 {
		return nil, fmt.Errorf("tlsconf: CA validity %v is not positive", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notBefore := time.Now().Add(-clockSkew)
	template := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             notBefore,
		NotAfter:              notBefore.Add(clockSkew + validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &CA{cert: cert, key: key, certPEM: encodeCert(der), keyPEM: keyPEM}, nil
}

// LoadCA reads a CA written before (WriteFiles(dir, name, ca.CertPEM(),
// ca.KeyPEM())), so `fjord dev` keeps one CA across restarts and the
// clients that trust it keep working.
func LoadCA(certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: CA certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: CA key: %w", err)
	}
	certs, err := parseCertificates(certPEM)
	if err != nil {
		return nil, fileError(roleCert, certFile, err)
	}
	cert := certs[0]
	if !cert.IsCA || cert.KeyUsage&x509.KeyUsageCertSign == 0 {
		return nil, fileError(roleCert, certFile, errors.New("not a CA certificate"))
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, fileError(roleKey, keyFile, err)
	}
	if pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(key.Public()) {
		return nil, fileError(roleKey, keyFile, fmt.Errorf("%w %s", ErrKeyMismatch, certFile))
	}
	return &CA{cert: cert, key: key, certPEM: encodeCert(cert.Raw), keyPEM: keyPEM}, nil
}

// CertPEM returns the CA's certificate, for a CA file. The caller must
// not modify it.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// KeyPEM returns the CA's private key (PKCS #8), for LoadCA. The caller
// must not modify it.
func (ca *CA) KeyPEM() []byte { return ca.keyPEM }

// Certificate returns the CA's certificate. The caller must not modify
// it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// IssueOptions describes a leaf certificate.
type IssueOptions struct {
	// CommonName is the subject's CN. Subject, if it has any attribute,
	// is the rest of the subject (CommonName overrides its CN); for
	// client certificates it is what Kafka's principal is made of.
	CommonName string
	Subject    pkix.Name
	// DNSNames and IPs are the names a server certificate is valid for.
	DNSNames []string
	IPs      []net.IP
	// Client and Server are the extended key usages; at least one.
	Client, Server bool
	// ValidFor is the validity from NotBefore (default one year).
	// NotBefore defaults to now minus five minutes of clock skew. Set
	// both to make expired or not-yet-valid certificates.
	ValidFor  time.Duration
	NotBefore time.Time
}

// Issue returns a new leaf certificate signed by the CA and its ECDSA
// P-256 key, both PEM (the certificate alone, without the CA's: peers
// trust the CA through their CA file).
func (ca *CA) Issue(opts IssueOptions) (certPEM, keyPEM []byte, err error) {
	if !opts.Client && !opts.Server {
		return nil, nil, errors.New("tlsconf: IssueOptions has neither Client nor Server")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	notBefore := opts.NotBefore
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-clockSkew)
	}
	validFor := opts.ValidFor
	if validFor == 0 {
		validFor = defaultLeafValidity
	}
	subject := opts.Subject
	if opts.CommonName != "" {
		subject.CommonName = opts.CommonName
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      subject,
		NotBefore:    notBefore,
		NotAfter:     notBefore.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		DNSNames:     opts.DNSNames,
		IPAddresses:  opts.IPs,
	}
	if opts.Server {
		template.ExtKeyUsage = append(template.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if opts.Client {
		template.ExtKeyUsage = append(template.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return encodeCert(der), keyPEM, nil
}

// WriteFiles writes certPEM to dir/name.crt (mode 0644) and keyPEM to
// dir/name.key (0600), each atomically: a temporary file in dir,
// fsynced, renamed over the old one. A Store reading them sees the old
// file or the new one, never a part; between the two renames it sees a
// new key with the old certificate, which it refuses (keeping the old
// pair) until the second lands. keyPEM may be nil to write only the
// certificate (a CA file). dir is created (0700) if missing. It returns
// the Files (without CAFile).
func WriteFiles(dir, name string, certPEM, keyPEM []byte) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, err
	}
	files := Files{CertFile: filepath.Join(dir, name+".crt")}
	if keyPEM != nil {
		files.KeyFile = filepath.Join(dir, name+".key")
		if err := writeFileAtomic(files.KeyFile, keyPEM, 0o600); err != nil {
			return Files{}, err
		}
	}
	if err := writeFileAtomic(files.CertFile, certPEM, 0o644); err != nil {
		return Files{}, err
	}
	return files, nil
}

func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	// CreateTemp makes the file 0600 from the start, so a key is never
	// readable by others, not even before the Chmod.
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return err
	}
	// The rename is durable once the directory is synced. Some systems
	// cannot sync a directory; the files are then as durable as the
	// system makes renames, which is no reason to fail the write.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func randomSerial() (*big.Int, error) {
	// 128 random bits: unique without bookkeeping (RFC 5280 allows 20
	// octets; CA/B Forum asks for 64 random bits). Plus one: RFC 5280
	// wants it positive.
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	return n.Add(n, big.NewInt(1)), nil
}

func encodeCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
