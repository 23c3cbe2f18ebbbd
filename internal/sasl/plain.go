package sasl

// PLAIN (RFC 4616): one client message, no challenge.
//
//	message = [authzid] NUL authcid NUL passwd      (UTF-8, no other NUL)
//
// The password crosses the wire as it is: PLAIN belongs on a TLS
// listener. Fjord keeps no passwords, so PLAIN salts the one it is given
// with the user's SCRAM credential and compares (VerifyPassword): a user
// can log in with PLAIN once it has a SCRAM-SHA-512 or SCRAM-SHA-256
// credential, the former preferred.
//
// Kafka's PlainSaslServer behaves the same way as seen by a client: an
// empty authcid or passwd gets "username not specified" or "password
// not specified", a wrong pair "Invalid username or password", an
// authzid that is not the authcid is refused. Fjord checks the authzid
// before the password, which spares the PBKDF2 and tells the client
// nothing it did not send.

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

type plainSession struct {
	server *Server
}

func (p *plainSession) step(msg []byte) ([]byte, *outcome, *Error) {
	fields := bytes.Split(msg, []byte{0})
	if len(fields) != 3 {
		return nil, nil, malformed(Plain, "%d NUL-separated fields, want 3", len(fields))
	}
	if !utf8.Valid(msg) {
		return nil, nil, malformed(Plain, "not UTF-8")
	}
	authzid, user, password := string(fields[0]), string(fields[1]), string(fields[2])
	if user == "" {
		return nil, nil, &Error{Kind: ErrMalformedMessage, Message: "Authentication failed: username not specified", Reason: "PLAIN: empty authcid"}
	}
	if password == "" {
		return nil, nil, &Error{Kind: ErrMalformedMessage, Message: "Authentication failed: password not specified",
			Reason: fmt.Sprintf("PLAIN: empty password for user %q", user)}
	}
	if authzid != "" && authzid != user {
		return nil, nil, &Error{Kind: ErrAuthenticationFailed, Message: msgAuthzidMismatch,
			Reason: fmt.Sprintf("PLAIN: user %q asked for authorization id %q", user, authzid)}
	}
	cred, found := p.credential(user)
	if !found {
		// Spend the PBKDF2 anyway, so that an unknown user costs what a
		// wrong password costs.
		VerifyPassword(decoyCredential(&p.server.decoySecret, user, ScramSHA512), password)
		return nil, nil, &Error{Kind: ErrAuthenticationFailed, Message: msgInvalidPassword,
			Reason: fmt.Sprintf("PLAIN: unknown user %q (no usable SCRAM credential)", user)}
	}
	if !VerifyPassword(cred, password) {
		return nil, nil, &Error{Kind: ErrAuthenticationFailed, Message: msgInvalidPassword,
			Reason: fmt.Sprintf("PLAIN: wrong password for user %q (checked against its %s credential)", user, cred.Mechanism)}
	}
	return []byte{}, &outcome{user: user}, nil
}

// credential returns the SCRAM credential PLAIN checks user's password
// against: the SHA-512 one, else the SHA-256 one. A stored credential
// that validate refuses counts as none.
func (p *plainSession) credential(user string) (ScramCredential, bool) {
	for _, mechanism := range [...]string{ScramSHA512, ScramSHA256} {
		c, ok := p.server.credentials.ScramCredential(user, mechanism)
		if ok && c.Mechanism == mechanism && c.validate() == nil {
			return c, true
		}
	}
	return ScramCredential{}, false
}
