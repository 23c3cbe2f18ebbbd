package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/audit"
	"github.com/fjordmq/fjord/internal/listener"
)

// The audit settings are refused by the flag that is wrong.
func TestAuditConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    AuditConfig
		want string
	}{
		{"size without a path", AuditConfig{MaxBytes: 1 << 20}, "audit-log-max-bytes is set but audit-log is not"},
		{"negative size", AuditConfig{Path: "a.log", MaxBytes: -1}, "audit-log-max-bytes -1: allowed: 65536 or more"},
		{"size below a line", AuditConfig{Path: "a.log", MaxBytes: audit.MinMaxBytes - 1}, "audit-log-max-bytes 65535"},
		{"path with a trailing space", AuditConfig{Path: "a.log "}, `audit-log "a.log " starts or ends with white space`},
	} {
		cfg := testConfig(t, t.TempDir())
		cfg.AuditLog = tc.c
		err := cfg.validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	cfg := testConfig(t, t.TempDir())
	cfg.AuditLog = AuditConfig{Path: "audit.log", MaxBytes: audit.MinMaxBytes}
	if err := cfg.validate(); err != nil {
		t.Errorf("a good audit config: %v", err)
	}
}

// A node refuses to start with an audit log it cannot open, saying
// which and why, before it touches its data directory.
func TestAuditLogUnwritableRefused(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, path, want string
	}{
		{"missing directory", filepath.Join(dir, "no-such-dir", "audit.log"), "no such file or directory (its directory must exist"},
		{"a directory", dir, "is not a regular file"},
	} {
		cfg := testConfig(t, filepath.Join(dir, "data-"+strings.ReplaceAll(tc.name, " ", "-")))
		cfg.AuditLog.Path = tc.path
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := Start(ctx, cfg)
		cancel()
		if err == nil {
			n.Close()
			t.Errorf("%s: started", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), "audit-log") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want audit-log and %q", tc.name, err, tc.want)
		}
		if _, err := os.Stat(cfg.DataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the data directory was made before the audit log was refused", tc.name)
		}
	}
}

// A node with an audit log records its Kafka listeners' logins, failed
// and good, and their denials, registers the log's metrics, and closes
// the file with everything written.
func TestAuditLogKafkaListener(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, filepath.Join(dir, "data"))
	cfg.KafkaAddr, cfg.HTTPAddr = "", ""
	cfg.Listeners = []listener.Listener{
		{Name: "PLAINTEXT", Bind: "127.0.0.1:0", Protocol: listener.Plaintext},
		{Name: "SASL_PLAINTEXT", Bind: "127.0.0.1:0", Protocol: listener.SASLPlaintext},
	}
	cfg.SASL.BootstrapUsers = []ScramUser{{Mechanism: "SCRAM-SHA-512", Name: "alice", Password: "alice-secret"}}
	// The node's own clients come over PLAINTEXT, as User:ANONYMOUS.
	cfg.Authz.SuperUsers = []string{"User:ANONYMOUS"}
	path := filepath.Join(dir, "audit.log")
	cfg.AuditLog = AuditConfig{Path: path, MaxBytes: 1 << 20}
	n := startNode(t, cfg)
	addr := n.ListenerAddr("SASL_PLAINTEXT").String()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func(pass string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.SASL(kscram.Auth{User: "alice", Pass: pass}.AsSha512Mechanism()),
			kgo.RetryTimeout(2*time.Second), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}

	if _, err := kadm.NewClient(client("guess-pw")).BrokerMetadata(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = false // one denial: DESCRIBE, not CREATE too
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr("orders")
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, client("alice-secret"))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("Metadata of orders without ACLs: error %d", code)
	}
	families, err := n.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	registered := false
	for _, f := range families {
		registered = registered || f.GetName() == "fjord_audit_events_dropped_total"
	}
	if !registered {
		t.Error("the audit log's metrics are not registered")
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("guess-pw")) || bytes.Contains(data, []byte("alice-secret")) {
		t.Errorf("a password is in the audit log:\n%s", data)
	}
	var failed, succeeded, denied int
	for line := range bytes.Lines(data) {
		var e audit.Event
		if err := json.Unmarshal(line, &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if host, _, _ := net.SplitHostPort(e.Client); host != "127.0.0.1" || e.Listener != "SASL_PLAINTEXT" {
			t.Errorf("event from %q on %q, want 127.0.0.1 on SASL_PLAINTEXT: %s", e.Client, e.Listener, line)
		}
		switch {
		case e.Kind == audit.KindAuthentication && e.Result == audit.ResultFailure && e.Mechanism == "SCRAM-SHA-512" && strings.Contains(e.Reason, `"alice"`):
			failed++
		case e.Kind == audit.KindAuthentication && e.Result == audit.ResultSuccess && e.Principal == "User:alice":
			succeeded++
		case e.Kind == audit.KindAuthorization && e.Result == audit.ResultDenied && e.Principal == "User:alice" &&
			e.API == "Metadata" && e.Operation == "DESCRIBE" && e.ResourceType == "TOPIC" && e.Resource == "orders":
			denied++
		default:
			t.Errorf("unexpected line %s", line)
		}
	}
	if failed == 0 || succeeded == 0 || denied != 1 {
		t.Errorf("%d failed logins, %d good ones and %d denials in the audit log, want some, some and 1:\n%s", failed, succeeded, denied, data)
	}
}
