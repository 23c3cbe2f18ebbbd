// Package fjordmsg holds Fjord's own requests on the Kafka listener:
// questions only Fjord's tools and nodes ask, which no Kafka API answers.
// They travel in Kafka's framing (request header, size, correlation id)
// and implement kmsg.Request and kmsg.Response, so a franz-go client
// sends them like any other request and the listener dispatches them
// like any other API.
//
// Their keys sit far above Kafka's (which are below 100 and grow by
// one), so a future Kafka API cannot take one. They are advertised in
// ApiVersions only to a client that names itself SoftwareName (KIP-511's
// client software name, ApiVersions v3+): Kafka clients never see a key
// they do not know. Fjord's clients name themselves with ClientOpts.
//
// The bodies are encoded with franz-go's kbin primitives, in the
// non-flexible shape of Kafka's v0 messages (int16-length strings,
// int32-length arrays); a new field means a new version.
package fjordmsg

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/fjordmq/fjord/internal/buildinfo"
)

// SoftwareName is the client software name Fjord's clients send in
// ApiVersions; a client that sends it is shown Fjord's keys.
const SoftwareName = "fjord"

// ClientOpts make a franz-go client Fjord's: it names itself Fjord's
// (so listeners advertise Fjord's requests to it) and allows them on top
// of franz-go's stable Kafka versions (franz-go refuses a key its
// maximum versions lack). A kgo.MaxVersions given after these replaces
// the allowance; build it with WithFjordKeys.
func ClientOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.SoftwareNameAndVersion(SoftwareName, softwareVersion(buildinfo.Read().Version)),
		kgo.MaxVersions(WithFjordKeys(kversion.Stable())),
	}
}

// softwareVersion fits a module version to KIP-511's pattern (letters,
// digits, '-' and '.', starting and ending with a letter or digit): a
// broker answers INVALID_REQUEST to anything else. A checkout's
// "(devel)" becomes "devel".
func softwareVersion(v string) string {
	b := []byte(v)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-') {
			b[i] = '-'
		}
	}
	if s := strings.Trim(string(b), "-."); s != "" {
		return s
	}
	return "unknown"
}

// WithFjordKeys adds Fjord's requests to v, at their latest versions,
// caps ApiVersions at ApiVersionsVersion, and returns v.
func WithFjordKeys(v *kversion.Versions) *kversion.Versions {
	v.SetMaxKeyVersion(DescribePositionsKey, new(DescribePositionsRequest).MaxVersion())
	v.SetMaxKeyVersion(MarkTopicKeyedKey, new(MarkTopicKeyedRequest).MaxVersion())
	v.SetMaxKeyVersion(ReportOfflineReplicasKey, new(ReportOfflineReplicasRequest).MaxVersion())
	if max, ok := v.LookupMaxKeyVersion(apiVersionsKey); !ok || max > ApiVersionsVersion {
		v.SetMaxKeyVersion(apiVersionsKey, ApiVersionsVersion)
	}
	return v
}

// ApiVersionsVersion is the ApiVersions version Fjord's clients send:
// the highest a Fjord listener serves, and one that carries the client
// software name (v3+). A client that asks a version the listener does
// not serve is answered, as Kafka clients expect, with the ranges of
// Kafka's APIs alone (the request's software name is not parsed), and
// franz-go takes those ranges without asking again.
const ApiVersionsVersion = 3

const apiVersionsKey = 18

// Keys of Fjord's requests.
const (
	// DescribePositionsKey: DescribePositionsRequest.
	DescribePositionsKey int16 = 10000
	// MarkTopicKeyedKey: MarkTopicKeyedRequest.
	MarkTopicKeyedKey int16 = 10001
	// ReportOfflineReplicasKey: ReportOfflineReplicasRequest.
	ReportOfflineReplicasKey int16 = 10002
)

// RequestForKey returns an empty request of the key's kind, Fjord's or
// Kafka's, or nil for a key neither knows.
func RequestForKey(key int16) kmsg.Request {
	switch key {
	case DescribePositionsKey:
		return new(DescribePositionsRequest)
	case MarkTopicKeyedKey:
		return new(MarkTopicKeyedRequest)
	case ReportOfflineReplicasKey:
		return new(ReportOfflineReplicasRequest)
	}
	return kmsg.RequestForKey(key)
}

// NameForKey names a key, Fjord's or Kafka's ("Unknown" for neither).
func NameForKey(key int16) string {
	switch key {
	case DescribePositionsKey:
		return "FjordDescribePositions"
	case MarkTopicKeyedKey:
		return "FjordMarkTopicKeyed"
	case ReportOfflineReplicasKey:
		return "FjordReportOfflineReplicas"
	}
	return kmsg.NameForKey(key)
}

// IsFjordKey reports whether key is one of Fjord's own.
func IsFjordKey(key int16) bool {
	return key == DescribePositionsKey || key == MarkTopicKeyedKey || key == ReportOfflineReplicasKey
}

// ErrMalformed is a body that does not decode: too short, a negative
// array length, or bytes left over.
var ErrMalformed = errors.New("fjordmsg: malformed message")

// reader wraps kbin.Reader with the checks Kafka's generated code leaves
// out: an array length must not be negative (these messages have no null
// arrays), and a message must use every byte.
type reader struct {
	kbin.Reader
	negative bool
}

func (r *reader) arrayLen() int {
	n := r.ArrayLen()
	if n < 0 {
		r.negative = true
		r.Src = nil // nothing after a bad length is read
		return 0
	}
	return int(n)
}

func (r *reader) done(what string) error {
	switch {
	case r.negative:
		return fmt.Errorf("%w: %s: a negative array length", ErrMalformed, what)
	case r.Complete() != nil:
		return fmt.Errorf("%w: %s: too short", ErrMalformed, what)
	case len(r.Src) > 0:
		return fmt.Errorf("%w: %s: %d bytes left over", ErrMalformed, what, len(r.Src))
	}
	return nil
}
