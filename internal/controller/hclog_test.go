package controller

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/testutil"
)

func TestRaftLogger(t *testing.T) {
	var buf testutil.Buffer
	base := newRaftLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	var l hclog.Logger = base
	l.Info("chatty info")
	l.Debug("chatty debug")
	l.Trace("chatty trace")
	l.Named("snapshot").With("id", 7).Warn("disk slow", "took", "2s")
	l.Error("it broke", "err", "boom")
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress(""), "last-leader-id", raft.ServerID(""))
	l.Warn("heartbeat timeout reached, starting election", "last-leader-addr", raft.ServerAddress("x:1"), "last-leader-id", raft.ServerID("2"))
	l.StandardLogger(nil).Print("[WARN] from a std logger")
	l.StandardLogger(nil).Print("[DEBUG] std debug")
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("[INFO] forced")

	out := buf.String()
	for _, unwanted := range []string{"chatty", "std debug"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("%q passed the warn filter:\n%s", unwanted, out)
		}
	}
	for _, want := range []string{
		`level=WARN msg="disk slow" logger=raft.snapshot id=7 took=2s`,
		`level=ERROR msg="it broke" logger=raft err=boom`,
		`level=INFO msg="heartbeat timeout reached, starting election" logger=raft last-leader-addr="" last-leader-id=""`,
		`level=WARN msg="heartbeat timeout reached, starting election" logger=raft last-leader-addr=x:1 last-leader-id=2`,
		`level=WARN msg="from a std logger"`,
		`level=ERROR msg=forced`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %s in:\n%s", want, out)
		}
	}
	if l.IsInfo() || !l.IsWarn() || l.GetLevel() != hclog.Warn || l.ResetNamed("x").Name() != "x" {
		t.Error("level or name accessors")
	}
}
