package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/tlsconf"
)

// The client commands (topic, produce, consume, cluster) talk to a node
// over the Kafka protocol with franz-go, like any other client.

const (
	defaultBrokers = "127.0.0.1:9092"
	// reachTimeout bounds the first request: a CLI call against a node
	// that is not running must say so promptly, not retry forever (kgo's
	// default for a client that expects its cluster to come back).
	reachTimeout = 5 * time.Second
	// requestTimeout bounds each admin command's requests.
	requestTimeout = 30 * time.Second
)

// clientOptions are the flags every client command shares.
type clientOptions struct {
	brokers string
	// The connection's security, with Kafka clients' names: the
	// listener's protocol and the TLS files.
	securityProtocol           string
	sslCAFile, sslCert, sslKey string
	// SASL: the mechanism, the user, and the file holding the password
	// (or FJORD_SASL_PASSWORD): never a flag, which ps would show.
	saslMechanism, saslUser, saslPasswordFile string
}

// clientSecurityFlags are the security flags, which, like --brokers,
// are also read from the environment (FJORD_SECURITY_PROTOCOL, ...):
// they describe the cluster, not one invocation.
var clientSecurityFlags = []string{"security-protocol", "ssl-ca-file", "ssl-cert-file", "ssl-key-file", "sasl-mechanism", "sasl-username", "sasl-password-file"}

func (o *clientOptions) addFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.brokers, "brokers", defaultBrokers,
		"comma-separated host:port list of nodes to bootstrap from (env FJORD_BROKERS)")
	f.Var(newEnumFlag(&o.securityProtocol, "PLAINTEXT", "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "security-protocol",
		"the brokers' listener protocol: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (security.protocol; env FJORD_SECURITY_PROTOCOL)")
	f.Var(newEnumFlag(&o.saslMechanism, "SCRAM-SHA-512", "SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"), "sasl-mechanism",
		"SASL mechanism: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN (sasl.mechanism; env FJORD_SASL_MECHANISM)")
	f.StringVar(&o.saslUser, "sasl-username", "", "SASL user (env FJORD_SASL_USERNAME)")
	f.StringVar(&o.saslPasswordFile, "sasl-password-file", "", "file holding the SASL user's password, its first line (env FJORD_SASL_PASSWORD_FILE; or the password itself in FJORD_SASL_PASSWORD)")
	f.StringVar(&o.sslCAFile, "ssl-ca-file", "", "PEM CA certificates the brokers' certificates are checked against (default: the system's; env FJORD_SSL_CA_FILE)")
	f.StringVar(&o.sslCert, "ssl-cert-file", "", "PEM client certificate, for a listener that asks for one (env FJORD_SSL_CERT_FILE)")
	f.StringVar(&o.sslKey, "ssl-key-file", "", "PEM private key of --ssl-cert-file (env FJORD_SSL_KEY_FILE)")
}

// applyEnv reads FJORD_BROKERS and the security flags' variables; the
// other flags of client commands are per-invocation and deliberately not
// read from the environment.
func (o *clientOptions) applyEnv(cmd *cobra.Command) error {
	return applySources(cmd, nil, "", append([]string{"brokers"}, clientSecurityFlags...)...)
}

// securityOpts are the client options of the connection's security.
func (o *clientOptions) securityOpts() ([]kgo.Opt, error) {
	useTLS := o.securityProtocol == "SSL" || o.securityProtocol == "SASL_SSL"
	useSASL := strings.HasPrefix(o.securityProtocol, "SASL_")
	tlsFiles := o.sslCAFile != "" || o.sslCert != "" || o.sslKey != ""
	switch {
	case !useTLS && tlsFiles:
		return nil, errors.New("--ssl-ca-file, --ssl-cert-file and --ssl-key-file need --security-protocol SSL or SASL_SSL")
	case !useSASL && (o.saslUser != "" || o.saslPasswordFile != ""):
		return nil, errors.New("--sasl-username and --sasl-password-file need --security-protocol SASL_SSL or SASL_PLAINTEXT")
	case (o.sslCert == "") != (o.sslKey == ""):
		return nil, errors.New("--ssl-cert-file and --ssl-key-file go together")
	}
	var opts []kgo.Opt
	switch {
	case useTLS && !tlsFiles:
		// No files: the brokers' certificates are checked against the
		// system's roots (kgo names the dialed host for verification).
		opts = append(opts, kgo.DialTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12}))
	case useTLS:
		store, err := tlsconf.Load(tlsconf.Files{CertFile: o.sslCert, KeyFile: o.sslKey, CAFile: o.sslCAFile}, tlsconf.Options{})
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.Dialer(store.DialContext))
	}
	if useSASL {
		mech, err := o.saslOpt()
		if err != nil {
			return nil, err
		}
		opts = append(opts, mech)
	}
	return opts, nil
}

// saslOpt is the SASL mechanism with the user and password.
func (o *clientOptions) saslOpt() (kgo.Opt, error) {
	if o.saslUser == "" {
		return nil, errors.New("--security-protocol " + o.securityProtocol + ": give --sasl-username")
	}
	pass := os.Getenv("FJORD_SASL_PASSWORD")
	if o.saslPasswordFile != "" {
		var err error
		if pass, err = node.ReadPasswordFile(o.saslPasswordFile); err != nil {
			return nil, fmt.Errorf("--sasl-password-file: %w", err)
		}
	}
	if pass == "" {
		return nil, errors.New("--security-protocol " + o.securityProtocol + ": give --sasl-password-file, or the password in FJORD_SASL_PASSWORD")
	}
	switch o.saslMechanism {
	case "PLAIN":
		return kgo.SASL(kplain.Auth{User: o.saslUser, Pass: pass}.AsMechanism()), nil
	case "SCRAM-SHA-256":
		return kgo.SASL(kscram.Auth{User: o.saslUser, Pass: pass}.AsSha256Mechanism()), nil
	default:
		return kgo.SASL(kscram.Auth{User: o.saslUser, Pass: pass}.AsSha512Mechanism()), nil
	}
}

// baseOpts are a client's seed brokers and security.
func (o *clientOptions) baseOpts(seeds []string) ([]kgo.Opt, error) {
	sec, err := o.securityOpts()
	if err != nil {
		return nil, err
	}
	return append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, sec...), nil
}

func (o *clientOptions) seeds() ([]string, error) {
	var seeds []string
	for _, s := range strings.Split(o.brokers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		host, port, err := net.SplitHostPort(s)
		if p, perr := strconv.ParseUint(port, 10, 16); err != nil || host == "" || perr != nil || p == 0 {
			return nil, fmt.Errorf("--brokers %q: want host:port[,host:port...], e.g. %s", o.brokers, defaultBrokers)
		}
		seeds = append(seeds, s)
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("--brokers is empty: want host:port[,host:port...], e.g. %s", defaultBrokers)
	}
	return seeds, nil
}

// connect returns a client that has answered one request, or the one-line
// "cannot reach" error.
func (o *clientOptions) connect(ctx context.Context, opts ...kgo.Opt) (*kgo.Client, error) {
	seeds, err := o.seeds()
	if err != nil {
		return nil, err
	}
	base, err := o.baseOpts(seeds)
	if err != nil {
		return nil, err
	}
	// Fjord's client options first (its own requests, as group
	// describe's lag figures need), so a command's opts can pin versions.
	cl, err := kgo.NewClient(append(append(append(fjordmsg.ClientOpts(), base...),
		kgo.ClientID("fjord-cli"),
		kgo.DialTimeout(reachTimeout),
		// Retries cover a leader moving or a topic just created; they
		// stop after RetryTimeout instead of kgo's "forever".
		kgo.RequestRetries(5),
		kgo.RetryTimeout(requestTimeout),
	), opts...)...)
	if err != nil {
		return nil, err
	}
	pingCtx, cancel := context.WithTimeout(ctx, reachTimeout)
	defer cancel()
	if err := cl.Ping(pingCtx); err != nil {
		cl.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("cannot reach a Fjord node at %s (%s); is \"fjord serve\" running?",
			strings.Join(seeds, ","), unreachableReason(err))
	}
	return cl, nil
}

// unreachableReason names why a dial failed in a few words.
func unreachableReason(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &dnsErr):
		return "unknown host " + dnsErr.Name
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Sprintf("no answer within %v", reachTimeout)
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset: is it a Kafka listener?"
	}
	return err.Error()
}

// kafkaError formats an error from a response with the broker's message,
// if it sent one: the code's name and the message ("INVALID_PARTITIONS:
// 10001 partitions (at most 10000)"), not kerr's canned description,
// which can be false for the case at hand (INVALID_PARTITIONS' says
// "Number of partitions is below 1." of a count above the maximum).
// Fjord's messages are its own words; a broker whose message repeats the
// code's text first has it cut, so the code is not said twice.
func kafkaError(err error, message string) error {
	var ke *kerr.Error
	switch {
	case message == "" || strings.Contains(err.Error(), message):
		return err
	case strings.HasPrefix(message, err.Error()):
		rest := strings.TrimPrefix(strings.TrimPrefix(message, err.Error()), ": ")
		if errors.As(err, &ke) && rest != "" {
			return &messageError{err: err, message: ke.Message + ": " + rest}
		}
		return &messageError{err: err, message: message}
	case errors.As(err, &ke) && err.Error() == ke.Error():
		return &messageError{err: err, message: ke.Message + ": " + message}
	}
	return fmt.Errorf("%w (%s)", err, message)
}

// messageError is err with the broker's fuller message as its text.
type messageError struct {
	err     error
	message string
}

func (e *messageError) Error() string { return e.message }
func (e *messageError) Unwrap() error { return e.err }

// adminClient connects and wraps the client in kadm.
func (o *clientOptions) adminClient(ctx context.Context) (*kadm.Client, func(), error) {
	cl, err := o.connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return newAdmin(cl), cl.Close, nil
}

// newAdmin wraps cl in kadm with the CLI's request timeout.
func newAdmin(cl *kgo.Client) *kadm.Client {
	adm := kadm.NewClient(cl)
	adm.SetTimeoutMillis(int32(requestTimeout / time.Millisecond))
	return adm
}

// partitionCount returns a topic's partition count, or an error saying it
// does not exist.
func partitionCount(ctx context.Context, adm *kadm.Client, topic string) (int32, error) {
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return 0, err
	}
	d, ok := topics[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return 0, fmt.Errorf("topic %q does not exist", topic)
	}
	if d.Err != nil {
		return 0, fmt.Errorf("topic %q: %w", topic, d.Err)
	}
	return int32(len(d.Partitions)), nil
}
