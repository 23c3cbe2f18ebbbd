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
//
// # librdkafka's doubled nonce
//
// One client-final message that xdg-go refuses is accepted here:
// librdkafka's SCRAM client, from v0.0.99 until 2.6.1 fixed it
// (confluentinc/librdkafka#4895), answers with the client nonce twice,
//
//	C: c=biws,r=<cnonce><cnonce><snonce>,p=<proof>
//
// because it prepends its own nonce to the full nonce the server sent,
// which already starts with it. Debian's kcat, with librdkafka 2.0.2,
// is one such client; every client on a librdkafka before 2.6.1 is.
// Kafka accepted it for years: its ScramSaslServer did not compare the
// nonce at all before CVE-2024-56128, and the fix (3.7.2, 3.8.1, 3.9.0)
// compared with endsWith(serverFirst.nonce()) so as not to lock these
// clients out. Kafka 4.0 compares for equality, as RFC 5802 asks, and
// refuses them (edenhill/kcat#462).
//
// Fjord's check (doubledNonceFinal) is narrower than Kafka's endsWith,
// which took any prefix: it takes only the r= that librdkafka builds,
// exactly the client's own nonce followed by the full nonce this server
// sent, in a message of exactly c=, r= and p=, with c= the base64 of the
// gs2 header the client sent first. The proof is then checked over the
// AuthMessage as the client built it, with the doubled nonce in it, and
// the server signature is computed over the same AuthMessage, which is
// what librdkafka verifies. Accepting this costs nothing against replay:
// the AuthMessage still holds this exchange's server-first message and
// its fresh server nonce, so a proof recorded from another exchange does
// not verify. Every other message, and every other nonce mismatch, is
// xdg-go's to refuse, with the same error as before.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
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
	// newHash is the mechanism's hash, for doubledNonceFinal.
	newHash func() hash.Hash
	// credential is what lookup gave the conversation, the user's or a
	// decoy, and firstRound what the conversation heard and answered in
	// its first step: xdg-go keeps both but does not expose them, and
	// doubledNonceFinal needs them. firstRound is set only when that step
	// succeeded.
	credential scram.StoredCredentials
	firstRound scramFirstRound
}

func newScramSession(s *Server, mechanism string) *scramSession {
	hash, _, err := scramHash(mechanism)
	if err != nil {
		panic(fmt.Sprintf("sasl: SCRAM session for %q", mechanism))
	}
	ss := &scramSession{server: s, mechanism: mechanism, first: true, newHash: scramNewHash(mechanism)}
	// A scram.Server per exchange, because the lookup records in ss
	// whether it fell back to a decoy. It is two words and a closure.
	srv, err := hash.NewServer(ss.lookup)
	if err != nil {
		panic(fmt.Sprintf("sasl: xdg-go/scram NewServer: %v", err))
	}
	nonce := s.scramNonce
	if nonce == nil {
		nonce = alphanumericNonce
	}
	srv = srv.WithNonceGenerator(nonce)
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
	ss.credential = scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
		StoredKey:  c.StoredKey,
		ServerKey:  c.ServerKey,
	}
	return ss.credential, nil
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
	// If the messages do not split as xdg-go's did (they always should),
	// firstRound stays zero and doubledNonceFinal matches nothing: only
	// xdg-go's own check is left, which fails closed.
	ss.firstRound, _ = newScramFirstRound(msg, reply)
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
		// xdg-go parsed the message and refused it. If it is
		// librdkafka's doubled nonce, the proof decides instead (see the
		// file comment); anything else fails as xdg-go says.
		reason := fmt.Sprintf("%s: user %q: %s (%v)", ss.mechanism, user, reply, err)
		if final, shape, derr := doubledNonceFinal(ss.newHash, ss.credential, ss.firstRound, msg); shape {
			// A proof that verifies against a decoy is unreachable, as
			// below: refuse rather than trust that.
			if derr == nil && !ss.unknown {
				return []byte(final), &outcome{user: user}, nil
			}
			reason = fmt.Sprintf("%s: user %q: client-final with librdkafka's doubled nonce: %v", ss.mechanism, user, derr)
		}
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

// alphanumericNonce is a server nonce of letters and digits only, as
// Kafka's is (ScramFormatter.secureRandomString, base 36 of 130 random
// bits), so that clients see the nonces they see from Kafka; xdg-go's
// default is standard base64. It was first taken for the cure of Debian's
// kcat failing every SCRAM login, but librdkafka reads a nonce with '+'
// and '/' as well as any other: what failed was its doubled nonce (see
// doubledNonceFinal). 32 characters of 62 carry 190 bits.
func alphanumericNonce() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("sasl: reading random bytes: %v", err))
	}
	for i, v := range b {
		// 256 is not a multiple of 62: the first 8 letters are a
		// little likelier, which costs a fraction of a bit of the 190.
		b[i] = alphabet[int(v)%len(alphabet)]
	}
	return string(b)
}

// scramNewHash is mechanism's hash, for doubledNonceFinal, which
// computes with the standard library alone.
func scramNewHash(mechanism string) func() hash.Hash {
	switch mechanism {
	case ScramSHA256:
		return sha256.New
	case ScramSHA512:
		return sha512.New
	}
	panic(fmt.Sprintf("sasl: no SCRAM hash for mechanism %q", mechanism))
}

// scramFirstRound is an exchange's first round as the server heard and
// answered it:
//
//	client-first  <gs2Header><clientFirstBare>   n,,  n=alice,r=<clientNonce>
//	server-first  <serverFirst>                  r=<nonce>,s=...,i=...
//
// Invariant, when clientNonce is not empty: nonce starts with
// clientNonce and is longer (the server's part follows it).
type scramFirstRound struct {
	gs2Header       string
	clientFirstBare string
	clientNonce     string
	serverFirst     string
	nonce           string
}

// newScramFirstRound splits a client-first message that xdg-go accepted
// and the server-first message it answered, as xdg-go split them. ok is
// false if they do not split so; the zero scramFirstRound is then
// returned.
func newScramFirstRound(clientFirst, serverFirst string) (round scramFirstRound, ok bool) {
	// gs2-cbind-flag "," [authzid] "," n=name "," r=nonce ["," ext]...
	fields := strings.SplitN(clientFirst, ",", 3)
	if len(fields) != 3 {
		return scramFirstRound{}, false
	}
	bare := strings.Split(fields[2], ",")
	if len(bare) < 2 {
		return scramFirstRound{}, false
	}
	clientNonce, ok1 := strings.CutPrefix(bare[1], "r=")
	serverField, _, _ := strings.Cut(serverFirst, ",")
	nonce, ok2 := strings.CutPrefix(serverField, "r=")
	if !ok1 || !ok2 || clientNonce == "" || len(nonce) <= len(clientNonce) || !strings.HasPrefix(nonce, clientNonce) {
		return scramFirstRound{}, false
	}
	return scramFirstRound{
		gs2Header:       fields[0] + "," + fields[1] + ",",
		clientFirstBare: fields[2],
		clientNonce:     clientNonce,
		serverFirst:     serverFirst,
		nonce:           nonce,
	}, true
}

// errInvalidDoubledNonceProof is doubledNonceFinal's refusal of a proof,
// for the broker's log.
var errInvalidDoubledNonceProof = errors.New("proof invalid")

// doubledNonceFinal checks a client-final message of librdkafka's
// doubled-nonce shape (see the file comment) per RFC 5802 section 3:
//
//	AuthMessage     = client-first-bare "," server-first "," client-final-without-proof
//	ClientSignature = HMAC(StoredKey, AuthMessage)
//	ClientKey       = ClientProof XOR ClientSignature
//	accept iff H(ClientKey) = StoredKey              (constant time)
//	server-final    = "v=" base64(HMAC(ServerKey, AuthMessage))
//
// with client-final-without-proof as the client sent it, the doubled
// nonce in it. shape is false for any message not of exactly the form
//
//	c=<base64 of round.gs2Header>,r=<round.clientNonce><round.nonce>,p=<proof>
//
// (and for every message when round is the zero value): the caller then
// refuses it as it would have. With shape true, err is nil and
// serverFinal is the reply iff the proof verifies.
//
// It is pure: the same inputs give the same answer.
func doubledNonceFinal(newHash func() hash.Hash, cred scram.StoredCredentials, round scramFirstRound, clientFinal string) (serverFinal string, shape bool, err error) {
	if round.clientNonce == "" {
		return "", false, nil
	}
	fields := strings.Split(clientFinal, ",")
	if len(fields) != 3 ||
		fields[0] != "c="+base64.StdEncoding.EncodeToString([]byte(round.gs2Header)) ||
		fields[1] != "r="+round.clientNonce+round.nonce {
		return "", false, nil
	}
	proofB64, ok := strings.CutPrefix(fields[2], "p=")
	if !ok {
		return "", false, nil
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil {
		return "", true, fmt.Errorf("proof not base64: %w", err)
	}
	size := newHash().Size()
	if len(proof) != size || len(cred.StoredKey) != size {
		return "", true, fmt.Errorf("%w: %d-byte proof, %d-byte stored key, want %d", errInvalidDoubledNonceProof,
			len(proof), len(cred.StoredKey), size)
	}
	authMessage := []byte(round.clientFirstBare + "," + round.serverFirst + "," + fields[0] + "," + fields[1])
	mac := hmac.New(newHash, cred.StoredKey)
	mac.Write(authMessage)
	clientKey := mac.Sum(nil) // ClientSignature, XORed into ClientKey below
	for i := range clientKey {
		clientKey[i] ^= proof[i]
	}
	h := newHash()
	h.Write(clientKey)
	if subtle.ConstantTimeCompare(h.Sum(nil), cred.StoredKey) != 1 {
		return "", true, errInvalidDoubledNonceProof
	}
	mac = hmac.New(newHash, cred.ServerKey)
	mac.Write(authMessage)
	return "v=" + base64.StdEncoding.EncodeToString(mac.Sum(nil)), true, nil
}
