package node

import (
	"slices"
	"strings"
	"testing"

	"github.com/fjordmq/fjord/internal/listener"
)

func TestAuthzConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		users []string
		want  string
	}{
		{"no type", []string{"admin"}, `super-users "admin": want Type:Name`},
		{"empty name", []string{"User:"}, `super-users "User:"`},
		{"too long", []string{"User:" + strings.Repeat("x", 4096)}, "a principal of 4101 bytes (at most 4096)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Authz.SuperUsers = tc.users
			err := cfg.validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("validate: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

// allow.everyone.if.no.acl.found defaults to true only while no listener
// authenticates clients, and an explicit value wins.
func TestAllowEveryoneDefault(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name      string
		listeners []listener.Listener
		auth      string
		set       *bool
		want      bool
	}{
		{"plaintext", nil, "", nil, true},
		{"SSL without client certificates", []listener.Listener{{Name: "SSL", Protocol: listener.SSL}}, "none", nil, true},
		{"SSL requesting client certificates", []listener.Listener{{Name: "SSL", Protocol: listener.SSL}}, "requested", nil, true},
		{"SSL requiring client certificates", []listener.Listener{{Name: "SSL", Protocol: listener.SSL}}, "required", nil, false},
		{"a SASL listener beside plaintext", []listener.Listener{{Name: "PLAINTEXT", Protocol: listener.Plaintext}, {Name: "SASL_SSL", Protocol: listener.SASLSSL}}, "", nil, false},
		{"SASL, set true", []listener.Listener{{Name: "SASL_PLAINTEXT", Protocol: listener.SASLPlaintext}}, "", &yes, true},
		{"plaintext, set false", nil, "", &no, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{cfg: Config{NodeID: 1, KafkaAddr: "127.0.0.1:0", Listeners: tc.listeners}}
			n.cfg.TLS.ClientAuth = tc.auth
			n.cfg.Authz.AllowEveryoneIfNoACLFound = tc.set
			n.cfg.Authz.SuperUsers = []string{"User:admin"}
			got := n.cfg.allowEveryoneIfNoACLFound()
			if got != tc.want {
				t.Errorf("allow.everyone.if.no.acl.found = %v, want %v", got, tc.want)
			}
		})
	}
}

// Authorization is off on a node that authenticates nobody and sets
// neither setting; on otherwise, with a SASL inter-broker user a super
// user without being named.
func TestACLConfig(t *testing.T) {
	plain := listener.Listener{Name: "PLAINTEXT", Bind: "127.0.0.1:0", Protocol: listener.Plaintext}
	sasl := listener.Listener{Name: "SASL_PLAINTEXT", Bind: "127.0.0.1:0", Protocol: listener.SASLPlaintext}
	yes := true
	for _, tc := range []struct {
		name       string
		listeners  []listener.Listener
		inter      string
		supers     []string
		allow      *bool
		wantOn     bool
		wantSupers []string
	}{
		{"plaintext, nothing set", []listener.Listener{plain}, "PLAINTEXT", nil, nil, false, nil},
		{"plaintext, super users set", []listener.Listener{plain}, "PLAINTEXT", []string{"User:admin"}, nil, true, []string{"User:admin"}},
		{"plaintext, allow-everyone set", []listener.Listener{plain}, "PLAINTEXT", nil, &yes, true, nil},
		{"SASL inter-broker", []listener.Listener{sasl}, "SASL_PLAINTEXT", nil, nil, true, []string{"User:broker"}},
		{"SASL inter-broker already named", []listener.Listener{sasl, plain}, "SASL_PLAINTEXT", []string{"User:broker", "User:admin"}, nil, true, []string{"User:broker", "User:admin"}},
		{"SASL for clients, PLAINTEXT between nodes", []listener.Listener{plain, sasl}, "PLAINTEXT", []string{"User:ANONYMOUS"}, nil, true, []string{"User:ANONYMOUS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{cfg: Config{NodeID: 1, Listeners: tc.listeners, InterBrokerListener: tc.inter}, log: testLogger(t)}
			n.cfg.SASL.InterBrokerUser = "broker"
			n.cfg.Authz = AuthzConfig{SuperUsers: tc.supers, AllowEveryoneIfNoACLFound: tc.allow}
			for _, l := range tc.listeners {
				n.listeners = append(n.listeners, boundListener{Listener: l})
			}
			got := n.aclConfig()
			if (got != nil) != tc.wantOn {
				t.Fatalf("authorization on = %v, want %v", got != nil, tc.wantOn)
			}
			if got != nil && !slices.Equal(got.SuperUsers, tc.wantSupers) {
				t.Errorf("super users %q, want %q", got.SuperUsers, tc.wantSupers)
			}
		})
	}
}
