package tlsconf

import "errors"

// The expected failures, for errors.Is. Load and Options.OnReloadError
// wrap the file ones with the file's role and path ("tlsconf: key file
// /etc/fjord/broker.key: private key does not match certificate"); a
// missing file wraps fs.ErrNotExist the same way.
var (
	// ErrNotPEM: the file holds no PEM block at all (garbage, DER, or
	// empty, as it is for a moment when written in place).
	ErrNotPEM = errors.New("no PEM data")
	// ErrNoCertificates: PEM, but no CERTIFICATE block (a CA file or
	// certificate file that holds only a key, say).
	ErrNoCertificates = errors.New("no certificates")
	// ErrNoPrivateKey: PEM, but no private key block (the certificate
	// and key paths swapped, say).
	ErrNoPrivateKey = errors.New("no private key")
	// ErrKeyMismatch: the key is not the certificate's. During a
	// rotation this is the moment between writing one file and the
	// other; the Store keeps the old pair until both match.
	ErrKeyMismatch = errors.New("private key does not match certificate")
	// ErrCertificateExpired: a certificate of the chain is past its
	// NotAfter (by Options.Now). Serving it would fail every handshake,
	// so the Store refuses it and keeps the one in force.
	ErrCertificateExpired = errors.New("certificate expired")
	// ErrCertificateNotYetValid: a certificate of the chain is before
	// its NotBefore. Refused like an expired one; since a failed set is
	// retried at every check, it is taken once it becomes valid.
	ErrCertificateNotYetValid = errors.New("certificate not yet valid")
	// ErrNoCertificate: a server handshake on a Store loaded without
	// CertFile (a trust-store-only Store is for clients).
	ErrNoCertificate = errors.New("tlsconf: no certificate configured")
	// ErrNoServerName: ClientConfig has no name to check the server's
	// certificate against (none given, and none sent in SNI, which
	// never carries an IP address).
	ErrNoServerName = errors.New("tlsconf: no server name to verify the server's certificate against")
	// ErrNoMatchingRule: no ssl.principal.mapping.rules rule matched the
	// distinguished name. Kafka fails the client's authentication then;
	// so should the caller.
	ErrNoMatchingRule = errors.New("tlsconf: no principal mapping rule matches")
)
