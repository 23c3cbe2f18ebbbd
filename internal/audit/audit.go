// Package audit is the node's audit log (issue 20, slice 4): one JSON
// line per authentication result and per authorization denial, with the
// principal, the client's address, the listener, and for a denial the
// operation and resource, so an operator can answer "who tried what,
// from where" after the fact.
//
// The Kafka listeners (internal/kafkaserver) and the HTTP API
// (internal/httpapi) report Events to a Recorder; Log is the Recorder
// that writes them to a file, rate-limited so that a flood of failed
// logins or denied requests cannot fill the disk.
package audit

import "time"

// Event kinds and results.
const (
	KindAuthentication = "authentication"
	KindAuthorization  = "authorization"

	ResultSuccess = "success"
	ResultFailure = "failure"
	ResultDenied  = "denied"
)

// Event is one audited decision. Empty fields are left out of its line.
type Event struct {
	// Time is when it was decided; zero: when Record was called. Log
	// writes it in UTC, RFC 3339 with milliseconds.
	Time time.Time `json:"time"`
	// Kind is KindAuthentication or KindAuthorization.
	Kind string `json:"event"`
	// Result is ResultSuccess or ResultFailure (authentication), or
	// ResultDenied (authorization; allowed requests are not audited).
	Result string `json:"result"`
	// Principal is "Type:Name"; for a failed authentication, the name
	// the client claimed, if any (never a password or token).
	Principal string `json:"principal,omitempty"`
	// Client is the client's address (host:port).
	Client string `json:"client,omitempty"`
	// Listener is the Kafka listener's name, or "HTTP".
	Listener string `json:"listener,omitempty"`
	// Mechanism is the SASL mechanism, "SSL" for a client certificate,
	// or the HTTP scheme ("Basic", "Bearer").
	Mechanism string `json:"mechanism,omitempty"`
	// API is the Kafka API or HTTP route the denial answered.
	API string `json:"api,omitempty"`
	// Operation, ResourceType and Resource name what was denied
	// (Kafka's names: WRITE, TOPIC, "orders").
	Operation    string `json:"operation,omitempty"`
	ResourceType string `json:"resource_type,omitempty"`
	Resource     string `json:"resource,omitempty"`
	// Rule is why the authorizer decided so (acl.Rule's String).
	Rule string `json:"rule,omitempty"`
	// Reason is the server-side reason of a failure, for the operator.
	Reason string `json:"reason,omitempty"`
}

// Recorder takes events. Implementations must be safe for concurrent
// use and must not block the caller on I/O for long: Record is called
// on request paths. The fields are the caller's to fill and the
// Recorder's to bound (Log cuts each to MaxFieldBytes); a caller must
// never put a password, token or other secret in one.
type Recorder interface {
	Record(Event)
}
