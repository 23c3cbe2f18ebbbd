package main

// fjord dev --tls: a dev cluster whose clients connect over SASL_SSL,
// with the credentials it needs made on its first start and kept in
// <data-dir>/tls:
//
//	ca.crt, ca.key      the cluster's CA, what clients trust (ca.key 0600)
//	node.crt, node.key  the nodes' certificate, for --host and localhost
//	                    (node.key 0600)
//	<user>.password     the developer's SCRAM password (0600)
//	broker.password     the nodes' own SCRAM password (0600)
//	client.properties   librdkafka and kcat settings, password included
//	                    (0600), written at every start
//
// Every node has one Kafka listener, SASL_SSL on its saved Kafka port,
// which the clients and the other nodes (as user broker) both dial. A
// second listener for the nodes alone was tried on paper and rejected:
// it needs a fourth port per node, which changes dev-cluster.json and
// the --base-port scheme, and on one machine it separates nothing a
// firewall could hold apart. The nodes share one certificate for the
// same reason: they are on one host, and a certificate each would give
// a restart more to check and a dev cluster nothing. The HTTP API serves
// HTTPS with it (--http-tls).
//
// Both users are super users: the point is developing against a secured
// cluster, not being stopped by ACLs. Whoever wants to try ACLs makes
// another user (fjord user create) and binds that. The controller ports
// stay plaintext (DESIGN.md section 26: the Raft transport has no TLS
// yet); they are on --host, which for the default 127.0.0.1 only this
// machine reaches. Any other --host is warned about (devTLSHostWarning),
// not refused: a dev cluster on a LAN address is a legitimate test of
// clients on other machines, whose user should know what it exposes.
//
// What a restart keeps and what it remakes. The CA is what clients
// trust, so it is remade only when missing or within devCertRenewBefore
// of expiring, and a damaged one is refused rather than overwritten (a
// new CA silently breaks every client that trusted the old one). The
// node certificate is nobody's trust anchor, so it is reissued whenever
// it is not good for this cluster: missing, damaged, expiring, for
// another host, or signed by another CA. A password reaches the metadata
// log only as a salted credential, when the log is made
// (--bootstrap-scram-users), so a password file is made only while no
// node has a log; after that a missing one is refused, since no new
// password could log in.
//
// The users reach the nodes in FJORD_BOOTSTRAP_SCRAM_USERS rather than
// as a flag: Kafka's --add-scram syntax holds the passwords, and a
// command line is shown to every user of the machine (ps) and written
// to node-<id>.log, while a process's environment is its owner's alone.
// serve ignores the users once its log exists, so every start passes
// them: a first start retried on new ports makes the logs again.

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

const (
	// devTLSDir, under --data-dir, holds a --tls cluster's credentials.
	devTLSDir = "tls"
	// devBrokerUser is the nodes' own SCRAM user on the inter-broker
	// listener.
	devBrokerUser = "broker"
	// defaultDevTLSUser is the developer's SCRAM user without
	// --tls-user.
	defaultDevTLSUser = "dev"
	// devCAValidity is long because replacing the CA means every client
	// must be given the new one; devNodeCertValidity is tlsconf's
	// default, and a restart after it reissues the certificate unseen.
	devCAValidity       = 10 * 365 * 24 * time.Hour
	devNodeCertValidity = 365 * 24 * time.Hour
	// devClockSkew backdates the node certificate's NotBefore, as
	// tlsconf does by default, for a peer whose clock is a little
	// behind.
	devClockSkew = 5 * time.Minute
	// devCertRenewBefore: a certificate that expires within this is
	// replaced at start, so that a dev cluster left running for days
	// does not start refusing every new connection halfway.
	devCertRenewBefore = 7 * 24 * time.Hour
	// devPasswordBytes of randomness: 192 bits, 32 characters of
	// base64url, none of which Kafka's --add-scram syntax or a shell
	// needs quoted.
	devPasswordBytes = 24
	// devSASLMechanism is what the banner tells clients to use; the
	// developer's user also gets a SCRAM-SHA-256 credential, for client
	// libraries whose default that is.
	devSASLMechanism = "SCRAM-SHA-512"
)

// devTLSUserRE is what --tls-user allows. The name goes into Kafka's
// --add-scram syntax (no ',' or ']'), --super-users (no ';'), a file
// name, and the banner's shell lines unquoted; letters, digits, '.',
// '_' and '-' are every name a developer needs.
var devTLSUserRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkDevTLSUser refuses a --tls-user dev cannot make.
func checkDevTLSUser(name string) error {
	if !devTLSUserRE.MatchString(name) {
		return fmt.Errorf("--tls-user %s: allowed: 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", quoteValue(name))
	}
	if name == devBrokerUser {
		return fmt.Errorf("--tls-user %s: that is the nodes' own user; choose another name", name)
	}
	return nil
}

// devLayoutTLS is a --tls cluster's entry in dev-cluster.json. A layout
// without one (every layout written before --tls existed) is a
// plaintext cluster.
type devLayoutTLS struct {
	// User is the developer's SCRAM user, made with the metadata log.
	User string `json:"user"`
}

// devTLS is a --tls cluster's credentials, checked or made by
// prepareDevTLS. Paths are absolute: they are printed for other
// terminals and written into client.properties, neither of which shares
// dev's working directory.
type devTLS struct {
	dir                                  string
	user                                 string
	caFile, caKeyFile, certFile, keyFile string
	userPasswordFile, brokerPasswordFile string
	propertiesFile                       string
	userPassword, brokerPassword         string
	caPEM                                []byte
	caFingerprint                        string // SHA-256, as openssl x509 -fingerprint prints it
	caNotAfter, certNotAfter             time.Time
	bootstrap                            string // the Kafka listeners, for client.properties
	newCA, newCert, newUser, newBroker   bool   // what this start made, for the tests and notes
	caWhy, certWhy                       string // why it was made: "" for a first start
}

func newDevTLS(absDir, user string) *devTLS {
	dir := filepath.Join(absDir, devTLSDir)
	return &devTLS{
		dir:                dir,
		user:               user,
		caFile:             filepath.Join(dir, "ca.crt"),
		caKeyFile:          filepath.Join(dir, "ca.key"),
		certFile:           filepath.Join(dir, "node.crt"),
		keyFile:            filepath.Join(dir, "node.key"),
		userPasswordFile:   filepath.Join(dir, user+".password"),
		brokerPasswordFile: filepath.Join(dir, devBrokerUser+".password"),
		propertiesFile:     filepath.Join(dir, "client.properties"),
	}
}

// devClusterFresh reports whether no node of l has a data directory
// under absDir, so none has a metadata log and the users are still to
// be made.
func devClusterFresh(absDir string, l devLayout) bool {
	for _, n := range l.Nodes {
		if _, err := os.Lstat(filepath.Join(absDir, "node-"+strconv.Itoa(n.ID))); !errors.Is(err, fs.ErrNotExist) {
			return false
		}
	}
	return true
}

// prepareDevTLS checks the credentials of the --tls cluster l under
// absDir and makes what is missing (see the top of this file for what is
// remade and what is refused). Everything that can refuse is checked
// before anything is written, so a refused start changes no file.
func prepareDevTLS(absDir string, l devLayout, now time.Time) (*devTLS, error) {
	t := newDevTLS(absDir, l.TLS.User)
	var kafka []string
	for _, n := range l.Nodes {
		kafka = append(kafka, l.addr(n.Kafka))
	}
	t.bootstrap = strings.Join(kafka, ",")
	fresh := devClusterFresh(absDir, l)

	var err error
	if t.userPassword, err = readDevPassword(t.userPasswordFile, t.user, fresh, absDir); err != nil {
		return nil, err
	}
	if t.brokerPassword, err = readDevPassword(t.brokerPasswordFile, devBrokerUser, fresh, absDir); err != nil {
		return nil, err
	}
	ca, err := tlsconf.LoadCA(t.caFile, t.caKeyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if _, statErr := os.Stat(t.caFile); statErr == nil {
			t.caWhy = "has no key " + t.caKeyFile
		}
		ca = nil
	case err != nil:
		return nil, fmt.Errorf("--tls: %v: remove %s and %s for a new CA (clients must then be given the new %s)",
			err, t.caFile, t.caKeyFile, filepath.Base(t.caFile))
	case ca.Certificate().NotAfter.Before(now.Add(devCertRenewBefore)):
		t.caWhy = "expires " + ca.Certificate().NotAfter.UTC().Format(time.RFC3339)
		ca = nil
	}

	// Nothing refuses from here on.
	if ca == nil {
		if ca, err = tlsconf.NewCA("fjord dev CA", devCAValidity); err != nil {
			return nil, err
		}
		if _, err := tlsconf.WriteFiles(t.dir, "ca", ca.CertPEM(), ca.KeyPEM()); err != nil {
			return nil, fmt.Errorf("--tls: writing the CA: %v", err)
		}
		t.newCA = true
	}
	t.caPEM = ca.CertPEM()
	t.caNotAfter = ca.Certificate().NotAfter
	sum := sha256.Sum256(ca.Certificate().Raw)
	t.caFingerprint = fingerprint(sum[:])

	leaf, why := loadDevNodeCert(t.certFile, t.keyFile)
	if leaf != nil {
		why = devNodeCertProblem(leaf, ca.Certificate(), l.Host, now)
	}
	if why != "" {
		if why != "missing" {
			t.certWhy = why
		}
		certPEM, keyPEM, err := ca.Issue(devNodeCertOptions(l.Host, ca.Certificate(), now))
		if err != nil {
			return nil, err
		}
		if _, err := tlsconf.WriteFiles(t.dir, "node", certPEM, keyPEM); err != nil {
			return nil, fmt.Errorf("--tls: writing the node certificate: %v", err)
		}
		block, _ := pem.Decode(certPEM)
		if leaf, err = x509.ParseCertificate(block.Bytes); err != nil {
			return nil, err
		}
		t.newCert = true
	}
	t.certNotAfter = leaf.NotAfter

	if t.userPassword == "" {
		if t.userPassword, err = makeDevPassword(t.userPasswordFile); err != nil {
			return nil, err
		}
		t.newUser = true
	}
	if t.brokerPassword == "" {
		if t.brokerPassword, err = makeDevPassword(t.brokerPasswordFile); err != nil {
			return nil, err
		}
		t.newBroker = true
	}
	if err := writeDevSecret(t.propertiesFile, []byte(t.properties(true))); err != nil {
		return nil, fmt.Errorf("--tls: %v", err)
	}
	return t, nil
}

// notes says what prepareDevTLS found and did, one line each, for
// stderr: a user must hear that a CA was replaced, since every client
// that trusted the old one now fails.
func (t *devTLS) notes() []string {
	var out []string
	switch {
	case t.newCA && t.caWhy == "":
		out = append(out, fmt.Sprintf("made a CA, %s (SHA-256 %s)", t.caFile, t.caFingerprint))
	case t.newCA:
		out = append(out, fmt.Sprintf("the CA %s %s: made a new one (SHA-256 %s); give clients that trusted the old one the new file",
			t.caFile, t.caWhy, t.caFingerprint))
	default:
		out = append(out, fmt.Sprintf("using the CA %s (SHA-256 %s), valid until %s", t.caFile, t.caFingerprint, t.caNotAfter.UTC().Format(time.DateOnly)))
	}
	switch {
	case t.newCert && t.certWhy == "":
		out = append(out, fmt.Sprintf("issued the node certificate %s, valid until %s", t.certFile, t.certNotAfter.UTC().Format(time.DateOnly)))
	case t.newCert:
		out = append(out, fmt.Sprintf("the node certificate %s %s: issued a new one, valid until %s", t.certFile, t.certWhy, t.certNotAfter.UTC().Format(time.DateOnly)))
	}
	if t.newUser || t.newBroker {
		out = append(out, fmt.Sprintf("made the SCRAM users %s (password in %s) and %s for the nodes (%s)", t.user, t.userPasswordFile, devBrokerUser, t.brokerPasswordFile))
	}
	return out
}

// loadDevNodeCert reads the node's certificate and key: the leaf, or
// why they cannot serve ("missing", or what is wrong with them).
func loadDevNodeCert(certFile, keyFile string) (*x509.Certificate, string) {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "missing"
	case err != nil:
		return nil, "cannot be used (" + err.Error() + ")"
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, "cannot be used (" + err.Error() + ")"
	}
	return leaf, ""
}

// devNodeCertProblem says why leaf cannot serve a cluster on host whose
// clients trust ca, or "" if it can: it must chain to ca, be valid now
// and for devCertRenewBefore more, not outlive ca, and name host and
// localhost.
func devNodeCertProblem(leaf, ca *x509.Certificate, host string, now time.Time) string {
	if leaf.NotAfter.Before(now.Add(devCertRenewBefore)) {
		return "expires " + leaf.NotAfter.UTC().Format(time.RFC3339)
	}
	if leaf.NotAfter.After(ca.NotAfter) {
		// Issued before devNodeCertOptions capped it, or by hand.
		return "expires " + leaf.NotAfter.UTC().Format(time.RFC3339) + ", after its CA (" + ca.NotAfter.UTC().Format(time.RFC3339) + ")"
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range []string{host, "localhost"} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: name, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		var unknown x509.UnknownAuthorityError
		switch {
		case errors.As(err, &unknown):
			return "is not signed by the CA " + ca.Subject.CommonName
		case err != nil:
			return "does not serve " + name + " (" + err.Error() + ")"
		}
	}
	return ""
}

// devNodeCertOptions is the nodes' certificate, issued at now by ca: a
// server for host and localhost (by name and loopback address, so a
// client may dial either), and a client too, for a listener that asks
// the nodes for one. It is valid from devClockSkew before now (not
// before ca) for devNodeCertValidity, but never past ca's NotAfter: a
// certificate cannot be trusted longer than its CA, and one that claims
// to be only misleads whoever reads its dates (the notes print them).
func devNodeCertOptions(host string, ca *x509.Certificate, now time.Time) tlsconf.IssueOptions {
	notBefore := now.Add(-devClockSkew)
	if notBefore.Before(ca.NotBefore) {
		notBefore = ca.NotBefore
	}
	o := tlsconf.IssueOptions{CommonName: "fjord dev node", Server: true, Client: true,
		NotBefore: notBefore, ValidFor: min(devNodeCertValidity, ca.NotAfter.Sub(notBefore)),
		DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	switch ip := net.ParseIP(host); {
	case ip == nil && host != "localhost":
		o.DNSNames = append(o.DNSNames, host)
	case ip != nil && !ip.IsLoopback():
		o.IPs = append(o.IPs, ip)
	}
	return o
}

// readDevPassword reads a user's password file: "" when it is missing
// and may be made (fresh), an error when it is missing from a cluster
// whose logs already hold the user, or is unreadable or empty.
func readDevPassword(path, user string, fresh bool, absDir string) (string, error) {
	pw, err := node.ReadPasswordFile(path)
	switch {
	case err == nil:
		return pw, nil
	case errors.Is(err, fs.ErrNotExist) && fresh:
		return "", nil
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("--tls: %s is missing, and the cluster's user %s was made with the password it held: put the file back, or remove %s to start over",
			path, user, absDir)
	default:
		return "", fmt.Errorf("--tls: user %s's password file: %v", user, err)
	}
}

// makeDevPassword writes a new random password to path (0600).
func makeDevPassword(path string) (string, error) {
	b := make([]byte, devPasswordBytes)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	pw := base64.RawURLEncoding.EncodeToString(b)
	if err := writeDevSecret(path, []byte(pw+"\n")); err != nil {
		return "", fmt.Errorf("--tls: %v", err)
	}
	return pw, nil
}

// writeDevSecret writes data to path, mode 0600 from its first byte
// (CreateTemp's mode), whole or not at all (a rename).
func writeDevSecret(path string, data []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// fingerprint formats a digest as openssl x509 -fingerprint does
// (AB:CD:...), so a user can compare it with what openssl says of the
// file a client was given.
func fingerprint(sum []byte) string {
	var b strings.Builder
	for i, c := range sum {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", c)
	}
	return b.String()
}

// serveArgs are a node's flags for its Kafka listener on kafkaAddr, in
// place of --kafka-addr.
func (t *devTLS) serveArgs(kafkaAddr string) []string {
	return []string{
		"--listeners", "SASL_SSL://" + kafkaAddr,
		"--ssl-cert-file", t.certFile, "--ssl-key-file", t.keyFile, "--ssl-ca-file", t.caFile,
		"--http-tls",
		"--inter-broker-sasl-username", devBrokerUser, "--inter-broker-sasl-password-file", t.brokerPasswordFile,
		"--super-users", "User:" + devBrokerUser + ";User:" + t.user,
	}
}

// bootstrapEnv is the users, for a node's environment (see the top of
// this file for why not a flag).
func (t *devTLS) bootstrapEnv() string {
	return envName("bootstrap-scram-users") + "=" + strings.Join([]string{
		fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", devBrokerUser, t.brokerPassword),
		fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", t.user, t.userPassword),
		fmt.Sprintf("SCRAM-SHA-256=[name=%s,password=%s]", t.user, t.userPassword),
	}, " ")
}

// kafkaOpts are the options of dev's own Kafka clients (the readiness
// check): the developer's user over TLS, which also proves, before the
// banner says so, that the printed settings work.
func (t *devTLS) kafkaOpts() ([]kgo.Opt, error) {
	store, err := tlsconf.Load(tlsconf.Files{CAFile: t.caFile}, tlsconf.Options{})
	if err != nil {
		return nil, err
	}
	return []kgo.Opt{kgo.Dialer(store.DialContext), kgo.SASL(kscram.Auth{User: t.user, Pass: t.userPassword}.AsSha512Mechanism())}, nil
}

// httpTLSConfig trusts the CA alone, for dev's /readyz polls over
// HTTPS.
func (t *devTLS) httpTLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(t.caPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// properties are librdkafka's settings for the cluster, as kcat -F and
// every librdkafka-based client read them. withPassword: the file's
// form; without, the banner's, which names the password file instead.
// sasl.mechanism is librdkafka's alias of sasl.mechanisms and the Java
// client's name, so the lines read the same to both.
func (t *devTLS) properties(withPassword bool) string {
	var b strings.Builder
	if withPassword {
		b.WriteString("# fjord dev --tls: librdkafka client settings (kcat -F " + t.propertiesFile + "), written at every start\n")
	}
	fmt.Fprintf(&b, "bootstrap.servers=%s\nsecurity.protocol=SASL_SSL\nsasl.mechanism=%s\nsasl.username=%s\n", t.bootstrap, devSASLMechanism, t.user)
	if withPassword {
		fmt.Fprintf(&b, "sasl.password=%s\n", t.userPassword)
	} else {
		fmt.Fprintf(&b, "# sasl.password=<the first line of %s>\n", t.userPasswordFile)
	}
	fmt.Fprintf(&b, "ssl.ca.location=%s\n", t.caFile)
	return b.String()
}

// cliFlags are the fjord client flags for the cluster, as the banner's
// commands carry them.
func (t *devTLS) cliFlags() string {
	return fmt.Sprintf(" --security-protocol SASL_SSL --ssl-ca-file %s --sasl-username %s --sasl-password-file %s",
		shellWord(t.caFile), t.user, shellWord(t.userPasswordFile))
}

// cliEnv is cliFlags as the environment variables the client commands
// read, one export each.
func (t *devTLS) cliEnv() []string {
	return []string{
		"FJORD_SECURITY_PROTOCOL=SASL_SSL",
		"FJORD_SSL_CA_FILE=" + shellWord(t.caFile),
		"FJORD_SASL_USERNAME=" + t.user,
		"FJORD_SASL_PASSWORD_FILE=" + shellWord(t.userPasswordFile),
	}
}

// curl is a line asking node httpAddr's HTTP API for the cluster, over
// HTTPS with the CA and as the developer's user.
//
// The password is read by the shell when the line runs: it is not
// printed, and the file stays the one place it is. It reaches curl as a
// config line on stdin (-K -), not in curl's argv: `-u "dev:$(cat f)"`
// was the first form, and put the password on curl's command line, where
// every user of the machine sees it (ps, /proc/<pid>/cmdline). printf is
// a builtin of sh, bash and zsh, so no process has it in its argv
// either; bash's `<<<` was rejected as not POSIX (dash is /bin/sh on
// Debian). The user name and a base64url password need no escaping in
// curl's double quotes.
func (t *devTLS) curl(httpAddr string) string {
	return fmt.Sprintf(`printf 'user = "%s:%%s"\n' "$(cat %s)" | curl -sS --cacert %s -K - https://%s/v1/cluster`,
		t.user, shellWord(t.userPasswordFile), shellWord(t.caFile), httpAddr)
}

// devTLSHostWarning is what to tell the user of a --tls cluster on
// host, or "" when host is a loopback address (or localhost), which only
// this machine reaches. SASL_SSL and HTTPS guard the Kafka and HTTP
// listeners; the controller ports still serve Raft in plaintext, with
// no authentication (DESIGN.md section 26), and on any other host
// whoever reaches them can vote, or append to the metadata log: users,
// ACLs, topics. A name other than localhost is warned about too:
// resolving it here would not say what the nodes' peers resolve it to.
func devTLSHostWarning(l devLayout) string {
	if ip := net.ParseIP(l.Host); l.Host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return ""
	}
	var ports []string
	for _, n := range l.Nodes {
		ports = append(ports, l.addr(n.Controller))
	}
	return fmt.Sprintf("warning: --host %s is not a loopback address: --tls secures the Kafka and HTTP listeners, "+
		"but the controller (Raft) ports %s are plaintext and unauthenticated, and anyone who reaches them can change "+
		"the cluster's metadata (users, ACLs, topics); firewall them, or use --host 127.0.0.1",
		l.Host, strings.Join(ports, ","))
}
