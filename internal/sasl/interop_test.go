package sasl

// Interop: franz-go's own client mechanisms, the code kgo runs against a
// Kafka broker, drive the server message by message. A success here means
// a real Kafka client's bytes are accepted, and that the client accepts
// the server's (franz-go checks SCRAM's server signature).

import (
	"strings"
	"testing"

	"github.com/go-jose/go-jose/v4"
	kafkasasl "github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"
)

func TestInteropFranzGo(t *testing.T) {
	now := newFakeNow()
	v, _ := fileValidator(t, now, nil, standardJWKS()...)
	s := newTestServer(t, testUsers(t), v)
	token := sign(t, keys().ec, jose.ES256, "ec-1", claims(now.Now(), nil))
	expired := sign(t, keys().ec, jose.ES256, "ec-1", claims(now.Now(), map[string]any{"exp": now.Now().Unix() - 3600}))

	for _, tc := range []struct {
		name      string
		mechanism kafkasasl.Mechanism
		// user is "" when the exchange must fail.
		user string
		// clientMessages is how many messages the client sends.
		clientMessages int
	}{
		{"PLAIN", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism(), "alice", 1},
		{"PLAIN with authzid", plain.Auth{Zid: "alice", User: "alice", Pass: "alice-secret"}.AsMechanism(), "alice", 1},
		{"PLAIN wrong password", plain.Auth{User: "alice", Pass: "nope"}.AsMechanism(), "", 1},
		{"SCRAM-SHA-512", kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(), "alice", 2},
		{"SCRAM-SHA-256", kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism(), "alice", 2},
		{"SCRAM-SHA-512 escaped name", kscram.Auth{User: "a,b=c", Pass: "odd-secret"}.AsSha512Mechanism(), "a,b=c", 2},
		{"SCRAM-SHA-512 wrong password", kscram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism(), "", 2},
		{"SCRAM-SHA-256 delegation token", kscram.Auth{User: "tokenid", Pass: "hmac", IsToken: true}.AsSha256Mechanism(), "", 1},
		{"OAUTHBEARER", oauth.Auth{Token: token}.AsMechanism(), "alice", 1},
		{"OAUTHBEARER with authzid and extensions", oauth.Auth{Zid: "alice", Token: token, Extensions: map[string]string{"logicalCluster": "lkc-1"}}.AsMechanism(), "alice", 1},
		// The error challenge, the client's %x01, then the failure.
		{"OAUTHBEARER expired token", oauth.Auth{Token: expired}.AsMechanism(), "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := start(t, s, tc.mechanism.Name())
			tr := drive(t, x, tc.mechanism, nil)
			if len(tr.clientMessages) != tc.clientMessages {
				t.Fatalf("client sent %d messages, want %d", len(tr.clientMessages), tc.clientMessages)
			}
			if tc.user == "" {
				wantKind(t, tr.serverErr, ErrAuthenticationFailed)
				if strings.HasPrefix(tc.name, "OAUTHBEARER") && string(tr.clientMessages[1]) != "\x01" {
					t.Fatalf("client answered the challenge with %q", tr.clientMessages[1])
				}
				return
			}
			if tr.serverErr != nil || tr.clientErr != nil || !tr.serverDone || !tr.clientDone {
				t.Fatalf("server %v, client %v, done %v/%v", tr.serverErr, tr.clientErr, tr.serverDone, tr.clientDone)
			}
			if x.Principal() != "User:"+tc.user {
				t.Fatalf("principal %q", x.Principal())
			}
		})
	}
}
