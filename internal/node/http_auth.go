package node

// The HTTP API's security (issue 20, slice 4): the same principals and
// the same ACLs as the Kafka listeners, from the same sources.
//
//   - Basic: the SCRAM credentials of the node's latest metadata image
//     (imageCredentials, which SCRAM and PLAIN on the listeners read).
//   - Bearer: the listeners' OAUTHBEARER, when a SASL listener enables
//     it (bearerOverSASL below).
//   - ACLs: the Kafka listener's authorizer of the latest image
//     (kafkaserver.Server.Authorizer), with its readiness, so a binding
//     applies to HTTP when it applies to Kafka.
//   - Credentials are required of every HTTP request exactly when some
//     listener authenticates its clients (Config.authenticates): an API
//     that let anonymous callers through would be a way around it.
//   - Then, when the HTTP listener is plain HTTP (no --http-tls), Basic
//     sends the SCRAM users' passwords in cleartext, where SCRAM on the
//     Kafka listeners never sends one: the node says so at start
//     (cleartextHTTPWarning) and serves all the same, since a TLS proxy
//     in front, or a loopback-only listener, may be the operator's plan.

import (
	"errors"
	"slices"
	"time"

	"github.com/fjordmq/fjord/internal/httpapi"
	"github.com/fjordmq/fjord/internal/sasl"
)

// cleartextHTTPWarning is the warning logged at start when the HTTP API
// takes passwords (Basic) over plain HTTP from a node whose Kafka
// listeners authenticate their clients; "" when there is none to give.
func cleartextHTTPWarning(cfg *Config) string {
	if !cfg.authenticates() || cfg.TLS.HTTP {
		return ""
	}
	return "the HTTP API is plain HTTP (no --http-tls) while the Kafka listeners authenticate their clients: " +
		"HTTP clients' Basic credentials (SCRAM users' passwords) and bearer tokens cross the network in cleartext; " +
		"enable --http-tls, or keep the HTTP listener behind a TLS proxy or on loopback"
}

// httpSecurity is the HTTP API's Security. REQUIRES: n.kafka built.
func (n *Node) httpSecurity() *httpapi.Security {
	if msg := cleartextHTTPWarning(&n.cfg); msg != "" {
		n.log.Warn(msg, "http_addr", n.cfg.HTTPAddr)
	}
	sec := &httpapi.Security{
		Required:    n.cfg.authenticates(),
		Credentials: imageCredentials{n.ctrl},
		Authorizer:  n.kafka.Authorizer,
	}
	if n.sasl != nil && slices.Contains(n.sasl.Mechanisms(), sasl.OAuthBearer) {
		sec.Bearer = bearerOverSASL{n.sasl}
	}
	return sec
}

// bearerOverSASL checks a bearer token with an OAUTHBEARER exchange on
// the listeners' SASL server: the one validator (and so the one copy of
// the identity provider's keys, refreshed once) that the listeners use,
// and the principal exactly as they name it. sasl.Server does not hand
// its Validator out; a second Validator from the same settings would
// fetch a JWKS URL twice and could, between refreshes, accept a token
// the listeners refuse.
type bearerOverSASL struct{ srv *sasl.Server }

// errNotBearerToken refuses a token that cannot be framed in an
// OAUTHBEARER message (the HTTP API checks the characters first; this
// keeps the framing safe whoever calls).
var errNotBearerToken = errors.New("node: not a bearer token")

func (b bearerOverSASL) Validate(token string) (string, time.Time, error) {
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return "", time.Time{}, errNotBearerToken
		}
	}
	if token == "" {
		return "", time.Time{}, errNotBearerToken
	}
	x, err := b.srv.Start(sasl.OAuthBearer)
	if err != nil {
		return "", time.Time{}, err
	}
	// RFC 7628's client initial response, as a Kafka client sends it.
	_, done, err := x.Step([]byte("n,,\x01auth=Bearer " + token + "\x01\x01"))
	if err == nil && !done {
		// The token did not validate: OAUTHBEARER answers with an
		// error challenge, and the failure (with its reason) comes
		// with the client's answer to it.
		_, _, err = x.Step([]byte{0x01})
	}
	if err != nil {
		return "", time.Time{}, err
	}
	if x.Principal() == "" {
		return "", time.Time{}, errNotBearerToken
	}
	return x.Principal(), x.Expiry(), nil
}
