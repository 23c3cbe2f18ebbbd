package sasl

// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677; KIP-84): two
// client messages, the conversation run by xdg-go/scram's server.
//
//	C: gs2-header client-first-bare   n,,n=alice,r=<cnonce>[,ext=val...]
//	S: server-first                   r=<cnonce><snonce>,s=<salt b64>,i=<iterations>
//	C: client-final                   c=<b64 gs2-header>,r=<cnonce><snonce>,p=<proof b64>
//	S: server-final                   v=<server signature b64>          done
//
// The user name in n= is a saslname: "," and "=" arrive as "=2C" and
// "=3D" and the library decodes them (an "=" followed by anything else is
// refused), so Credentials sees the name as AlterUserScramCredentials
// stored it.
//
// Kafka's rules, which the library does not know:
//
//   - The extension tokenauth=true (KIP-48) asks to authenticate with a
//     delegation token instead of a user; Fjord has no delegation tokens
//     and refuses it. Other extensions are ignored, as Kafka ignores them.
//   - An authorization id (a= in the gs2 header) must be the user.
//   - A failure sends no "e=" server-final message: Kafka fails the
//     SaslAuthenticate with SASL_AUTHENTICATION_FAILED and the same words
//     whatever went wrong.
//
// An unknown user is given a decoy credential (decoyCredential) so that
// the exchange fails at the proof, as a wrong password does: Kafka fails
// at the first message for an unknown user, which tells a guesser which
// names exist.

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/xdg-go/scram"
)

type scramSession struct {
	server    *Server
	mechanism string
	conv      *scram.ServerConversation
	// first is true until the client's first message has been stepped.
	first bool
	// unknown says the conversation runs against a decoy: for Reason.
	unknown bool
	// lookupNote says why the user's stored credential was not used.
	lookupNote string
}

func newScramSession(s *Server, mechanism string) *scramSession {
	hash, _, err := scramHash(mechanism)
	if err != nil {
		panic(fmt.Sprintf("sasl: SCRAM session for %q", mechanism))
	}
	ss := &scramSession{server: s, mechanism: mechanism, first: true}
	// A scram.Server per exchange, because the lookup records in ss
	// whether it fell back to a decoy. It is two words and a closure.
	srv, err := hash.NewServer(ss.lookup)
	if err != nil {
		panic(fmt.Sprintf("sasl: xdg-go/scram NewServer: %v", err))
	}
	if s.scramNonce != nil {
		srv = srv.WithNonceGenerator(s.scramNonce)
	}
	ss.conv = srv.NewConversation()
	return ss
}

// lookup is the library's CredentialLookup. It never fails: see decoy.
func (ss *scramSession) lookup(user string) (scram.StoredCredentials, error) {
	c, ok := ss.server.credentials.ScramCredential(user, ss.mechanism)
	switch {
	case !ok:
		ss.lookupNote = "unknown user"
	case c.Mechanism != ss.mechanism:
		ss.lookupNote = fmt.Sprintf("stored credential is for %s", c.Mechanism)
		ok = false
	default:
		if err := c.validate(); err != nil {
			ss.lookupNote = fmt.Sprintf("stored credential refused: %v", err)
			ok = false
		}
	}
	if !ok {
		ss.unknown = true
		c = decoyCredential(&ss.server.decoySecret, user, ss.mechanism)
	}
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
		StoredKey:  c.StoredKey,
		ServerKey:  c.ServerKey,
	}, nil
}

func (ss *scramSession) step(msg []byte) ([]byte, *outcome, *Error) {
	if len(msg) == 0 {
		return nil, nil, malformed(ss.mechanism, "empty message")
	}
	if !utf8.Valid(msg) {
		return nil, nil, malformed(ss.mechanism, "not UTF-8")
	}
	if ss.first {
		return ss.stepFirst(string(msg))
	}
	return ss.stepFinal(string(msg))
}

func (ss *scramSession) stepFirst(msg string) ([]byte, *outcome, *Error) {
	ss.first = false
	if tokenAuthRequested(msg) {
		return nil, nil, &Error{Kind: ErrAuthenticationFailed, Message: msgInvalidCredentials(ss.mechanism),
			Reason: ss.mechanism + ": tokenauth (delegation token) requested; Fjord has no delegation tokens"}
	}
	reply, err := ss.conv.Step(msg)
	if err != nil {
		// The lookup never fails, so every error here is the client's
		// message: its grammar, its name's encoding, its channel-binding
		// flag.
		return nil, nil, malformed(ss.mechanism, "client-first: %v", err)
	}
	user := ss.conv.Username()
	if authzid := ss.conv.AuthzID(); authzid != "" && authzid != user {
		return nil, nil, &Error{Kind: ErrAuthenticationFailed, Message: msgAuthzidMismatch,
			Reason: fmt.Sprintf("%s: user %q asked for authorization id %q", ss.mechanism, user, authzid)}
	}
	return []byte(reply), nil, nil
}

func (ss *scramSession) stepFinal(msg string) ([]byte, *outcome, *Error) {
	user := ss.conv.Username()
	reply, err := ss.conv.Step(msg)
	switch {
	case err != nil && reply == "":
		// The library returns no server error value only when the
		// message does not parse.
		return nil, nil, malformed(ss.mechanism, "client-final from user %q: %v", user, err)
	case err != nil:
		reason := fmt.Sprintf("%s: user %q: %s (%v)", ss.mechanism, user, reply, err)
		if ss.unknown {
			reason = fmt.Sprintf("%s: user %q: %s", ss.mechanism, user, ss.lookupNote)
		}
		return nil, nil, &Error{Kind: ErrAuthenticationFailed, Message: msgInvalidCredentials(ss.mechanism), Reason: reason}
	case !ss.conv.Valid() || ss.unknown:
		// Unreachable: the library checked the proof, and no client can
		// make a proof for a decoy. Refuse rather than trust that.
		return nil, nil, &Error{Kind: ErrAuthenticationFailed, Message: msgInvalidCredentials(ss.mechanism),
			Reason: fmt.Sprintf("%s: user %q: conversation ended without a valid proof", ss.mechanism, user)}
	}
	return []byte(reply), &outcome{user: user}, nil
}

// tokenAuthRequested reports whether a client-first message carries
// tokenauth=true among its extensions, the fields after the nonce:
//
//	gs2-flag "," [authzid] "," n=name "," r=nonce ("," key=value)*
//
// Kafka reads the value as Java's Boolean.parseBoolean does
// (case-insensitive "true"); so does this.
func tokenAuthRequested(msg string) bool {
	fields := strings.Split(msg, ",")
	if len(fields) <= 4 {
		return false
	}
	for _, f := range fields[4:] {
		key, value, _ := strings.Cut(f, "=")
		if key == "tokenauth" && strings.EqualFold(value, "true") {
			return true
		}
	}
	return false
}
