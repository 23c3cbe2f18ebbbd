package node

// SASL on the node's listeners, and as a client of its own inter-broker
// listener.
//
// SASL_PLAINTEXT and SASL_SSL listeners authenticate with the
// mechanisms of SASLConfig.EnabledMechanisms: SCRAM and PLAIN against
// the SCRAM credentials in the metadata log (so every node knows every
// user as soon as its image has the change), OAUTHBEARER against a JWKS.
// When the inter-broker listener is one of them, the node's own clients
// (replication, forwarding, the HTTP gateway) authenticate as
// SASLConfig.InterBrokerUser. That user must exist before any node can
// register: BootstrapUsers puts credentials into a new metadata log with
// its cluster id, as Kafka's `kafka-storage format --add-scram` does.

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/sasl"
)

// SASLConfig is the node's SASL. Field names follow Kafka's settings.
type SASLConfig struct {
	// EnabledMechanisms is sasl.enabled.mechanisms. Empty:
	// DefaultSASLMechanisms.
	EnabledMechanisms []string
	// OAuth configures OAUTHBEARER (JWKS file or URL, expected audience
	// and issuer, the subject claim); needed when EnabledMechanisms
	// names it.
	OAuth sasl.OAuthConfig
	// MaxReauth is connections.max.reauth.ms (KIP-368): how long a
	// session lasts before the client must re-authenticate. 0: until
	// the connection closes.
	MaxReauth time.Duration
	// InterBrokerMechanism is sasl.mechanism.inter.broker.protocol: how
	// the node's own clients authenticate to a SASL inter-broker
	// listener, SCRAM-SHA-512 (the default), SCRAM-SHA-256 or PLAIN.
	InterBrokerMechanism string
	// InterBrokerUser and InterBrokerPassword are the node's own
	// credentials on a SASL inter-broker listener.
	InterBrokerUser, InterBrokerPassword string
	// BootstrapUsers are SCRAM credentials committed with the cluster id
	// of a new metadata log (ParseBootstrapUsers).
	BootstrapUsers []ScramUser
}

// DefaultSASLMechanisms are the mechanisms of a SASL listener when none
// are named: SCRAM only, whose exchange never shows the password to the
// node (PLAIN sends it, so it belongs on SASL_SSL alone, by choice).
var DefaultSASLMechanisms = []string{sasl.ScramSHA512, sasl.ScramSHA256}

// ScramUser is one user of BootstrapUsers.
type ScramUser struct {
	Mechanism, Name, Password string
}

// bootstrapUserRE is one entry of Kafka's --add-scram syntax.
var bootstrapUserRE = regexp.MustCompile(`^(SCRAM-SHA-256|SCRAM-SHA-512)=\[name=([^,\]]+),password=([^\]]+)\]$`)

// ParseBootstrapUsers parses Kafka's `kafka-storage format --add-scram`
// syntax, entries separated by white space:
// SCRAM-SHA-512=[name=broker,password=secret].
func ParseBootstrapUsers(s string) ([]ScramUser, error) {
	var out []ScramUser
	for _, entry := range strings.Fields(s) {
		m := bootstrapUserRE.FindStringSubmatch(entry)
		if m == nil {
			return nil, fmt.Errorf("entry %q: want SCRAM-SHA-512=[name=NAME,password=PASSWORD] (or SCRAM-SHA-256)", redactPassword(entry))
		}
		out = append(out, ScramUser{Mechanism: m[1], Name: m[2], Password: m[3]})
	}
	return out, nil
}

// redactPassword hides what follows password= in an entry quoted in an
// error.
func redactPassword(entry string) string {
	if i := strings.Index(entry, "password="); i >= 0 {
		return entry[:i] + "password=..."
	}
	return entry
}

// enabledMechanisms is EnabledMechanisms or the default.
func (c SASLConfig) enabledMechanisms() []string {
	if len(c.EnabledMechanisms) == 0 {
		return DefaultSASLMechanisms
	}
	return c.EnabledMechanisms
}

// checkSASL checks the SASL settings as validate does the others.
func (c Config) checkSASL() error {
	ls, inter := c.kafkaListeners()
	saslListener, interSASL := false, false
	for _, l := range ls {
		saslListener = saslListener || l.Protocol.SASL()
		if l.Name == inter {
			interSASL = l.Protocol.SASL()
		}
	}
	s := c.SASL
	for _, m := range s.EnabledMechanisms {
		if !slices.Contains([]string{sasl.Plain, sasl.ScramSHA256, sasl.ScramSHA512, sasl.OAuthBearer}, m) {
			return fmt.Errorf("%w: sasl-enabled-mechanisms: %q is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER", ErrInvalidConfig, m)
		}
	}
	oauth := slices.Contains(s.enabledMechanisms(), sasl.OAuthBearer)
	switch {
	case oauth && s.OAuth.JWKSFile == "" && s.OAuth.JWKSURL == "":
		return fmt.Errorf("%w: sasl-enabled-mechanisms names OAUTHBEARER: give sasl-oauthbearer-jwks-file or sasl-oauthbearer-jwks-url", ErrInvalidConfig)
	case !oauth && (s.OAuth.JWKSFile != "" || s.OAuth.JWKSURL != ""):
		return fmt.Errorf("%w: a JWKS is given but sasl-enabled-mechanisms does not name OAUTHBEARER", ErrInvalidConfig)
	case s.MaxReauth < 0:
		return fmt.Errorf("%w: connections-max-reauth-ms %d: allowed 0 (never) or more", ErrInvalidConfig, s.MaxReauth.Milliseconds())
	case interSASL && (s.InterBrokerUser == "" || s.InterBrokerPassword == ""):
		return fmt.Errorf("%w: the inter-broker listener %s is SASL: give inter-broker-sasl-username and inter-broker-sasl-password-file", ErrInvalidConfig, inter)
	case !interSASL && (s.InterBrokerUser != "" || s.InterBrokerPassword != ""):
		return fmt.Errorf("%w: inter-broker SASL credentials are given but the inter-broker listener %s is not SASL", ErrInvalidConfig, inter)
	case !saslListener && len(s.EnabledMechanisms) > 0:
		return fmt.Errorf("%w: sasl-enabled-mechanisms is set but no listener is SASL_PLAINTEXT or SASL_SSL", ErrInvalidConfig)
	}
	if interSASL {
		switch m := s.interBrokerMechanism(); {
		case m != sasl.Plain && m != sasl.ScramSHA256 && m != sasl.ScramSHA512:
			return fmt.Errorf("%w: sasl-mechanism-inter-broker-protocol %q: allowed SCRAM-SHA-512, SCRAM-SHA-256, PLAIN", ErrInvalidConfig, m)
		case !slices.Contains(s.enabledMechanisms(), m):
			return fmt.Errorf("%w: sasl-mechanism-inter-broker-protocol %s is not among sasl-enabled-mechanisms", ErrInvalidConfig, m)
		}
	}
	for _, u := range s.BootstrapUsers {
		if _, err := sasl.NewCredential(u.Mechanism, u.Password, sasl.DefaultIterations); err != nil || u.Name == "" {
			return fmt.Errorf("%w: bootstrap-scram-users: user %q: %v", ErrInvalidConfig, u.Name, err)
		}
	}
	return nil
}

func (s SASLConfig) interBrokerMechanism() string {
	if s.InterBrokerMechanism == "" {
		return sasl.ScramSHA512
	}
	return s.InterBrokerMechanism
}

// openSASL builds the SASL server the node's SASL listeners share, if it
// has any.
func (n *Node) openSASL() error {
	ls, _ := n.cfg.kafkaListeners()
	if !slices.ContainsFunc(ls, func(l listener.Listener) bool { return l.Protocol.SASL() }) {
		return nil
	}
	cfg := sasl.Config{Mechanisms: n.cfg.SASL.enabledMechanisms(), Credentials: imageCredentials{n.ctrl}}
	if slices.Contains(cfg.Mechanisms, sasl.OAuthBearer) {
		v, err := sasl.NewValidator(n.cfg.SASL.OAuth)
		if err != nil {
			return fmt.Errorf("%w: OAUTHBEARER: %v", ErrInvalidConfig, err)
		}
		cfg.Validator = v
	}
	srv, err := sasl.New(cfg)
	if err != nil {
		return fmt.Errorf("%w: sasl: %v", ErrInvalidConfig, err)
	}
	n.sasl = srv
	return nil
}

// bootstrapRecords are the records of BootstrapUsers, salted now.
func (c Config) bootstrapRecords() ([]metadata.Record, error) {
	var recs []metadata.Record
	for _, u := range c.SASL.BootstrapUsers {
		cred, err := sasl.NewCredential(u.Mechanism, u.Password, sasl.DefaultIterations)
		if err != nil {
			return nil, fmt.Errorf("%w: bootstrap-scram-users: user %q: %v", ErrInvalidConfig, u.Name, err)
		}
		recs = append(recs, metadata.ScramCredentialRecord{User: u.Name, Mechanism: cred.Mechanism,
			Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations})
	}
	return recs, nil
}

// interBrokerSASL is the SASL option of the node's own clients of a SASL
// inter-broker listener.
func (n *Node) interBrokerSASL() kgo.Opt {
	s := n.cfg.SASL
	switch s.interBrokerMechanism() {
	case sasl.Plain:
		return kgo.SASL(kplain.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPassword}.AsMechanism())
	case sasl.ScramSHA256:
		return kgo.SASL(kscram.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPassword}.AsSha256Mechanism())
	default:
		return kgo.SASL(kscram.Auth{User: s.InterBrokerUser, Pass: s.InterBrokerPassword}.AsSha512Mechanism())
	}
}

// imageCredentials finds SCRAM credentials in the node's latest image.
type imageCredentials struct{ images controlplane.Images }

func (c imageCredentials) ScramCredential(user, mechanism string) (sasl.ScramCredential, bool) {
	cred, ok := c.images.Image().ScramCredential(user, mechanism)
	if !ok {
		return sasl.ScramCredential{}, false
	}
	return sasl.ScramCredential{Mechanism: cred.Mechanism, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: cred.Iterations}, true
}

// ReadPasswordFile reads a password from a file: its first line,
// without the line end (a file written by echo has one).
func ReadPasswordFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("%s: empty password", path)
	}
	return line, nil
}
