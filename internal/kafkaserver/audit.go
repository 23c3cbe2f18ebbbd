package kafkaserver

// The audit events of the Kafka listeners (Config.Audit; internal/audit):
//
//   - every SASL authentication and re-authentication, success or
//     failure (sasl.go, where the metrics count them), with the
//     mechanism and, on failure, the reason the client is not told;
//   - every TLS client certificate accepted on an SSL listener as the
//     connection's principal (mechanism "SSL"), and every handshake that
//     fails there (security.go);
//   - every authorization denial of something a client asked for
//     (authz.go's denied; the quiet checks that filter an answer's lists
//     are not denials of a request and are not recorded, as Kafka's
//     logIfDenied=false).
//
// Allowed requests are not recorded: one line per produce would be the
// request log, not an audit log.
//
// No event carries a password, token or SCRAM proof: saslAuditReason
// says which of the sasl package's reasons could, and leaves them out.

import (
	"errors"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/listener"
	"github.com/fjordmq/fjord/internal/sasl"
)

// auditDenied records the denial of req's principal doing op on the
// resource of type rt called name.
func (s *Server) auditDenied(req *request, op acl.Operation, rt acl.ResourceType, name string, d acl.Decision) {
	if s.cfg.Audit == nil {
		return
	}
	e := audit.Event{
		Kind: audit.KindAuthorization, Result: audit.ResultDenied,
		Principal: req.principal(), API: fjordmsg.NameForKey(req.key),
		Operation: op.String(), ResourceType: rt.String(), Resource: name, Rule: d.Rule.String(),
	}
	if c := req.conn; c != nil {
		e.Client, e.Listener = c.remote, c.listener.Name
	}
	s.cfg.Audit.Record(e)
}

// auditAuthentication records an authentication of c: its result, the
// mechanism, the principal (authenticated, or for a failure one the
// exchange had already established, else none) and the reason of a
// failure.
func (c *conn) auditAuthentication(result, mechanism, principal, reason string) {
	if c.s.cfg.Audit == nil {
		return
	}
	c.s.cfg.Audit.Record(audit.Event{
		Kind: audit.KindAuthentication, Result: result, Principal: principal,
		Client: c.remote, Listener: c.listener.Name, Mechanism: mechanism, Reason: reason,
	})
}

// mechanismSSL is the mechanism of a TLS client certificate's
// authentication.
const mechanismSSL = "SSL"

// auditTLS records a TLS authentication on an SSL listener, where the
// handshake is how a client authenticates (on SASL_SSL the SASL exchange
// is, and is recorded instead). A handshake cut short by the server
// closing is nobody's failure and is not recorded.
func (c *conn) auditTLS(result, principal string, err error) {
	if c.listener.Protocol != listener.SSL || c.s.ctx.Err() != nil {
		return
	}
	reason := ""
	if err != nil {
		reason = err.Error()
	}
	c.auditAuthentication(result, mechanismSSL, principal, reason)
}

// saslAuditReason is the reason an audit line gives for a failed SASL
// exchange: the sasl package's Reason, which is for the operator and
// names the user and the check that failed, except where it may quote the
// client's message: a malformed OAUTHBEARER message may be quoted with
// its token in it ("kvpair ... is not key=value"), so only the kind of
// failure is given then.
func saslAuditReason(mechanism string, err error) string {
	var se *sasl.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	if mechanism == sasl.OAuthBearer && errors.Is(se, sasl.ErrMalformedMessage) {
		return sasl.OAuthBearer + ": malformed client message"
	}
	if se.Reason == "" {
		return se.Error()
	}
	return se.Reason
}
