package kafkaserver

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Only Config.InternalClientID, exactly, may produce to an internal
// topic; a null or empty client id never matches, also when no id is
// configured (an empty id would otherwise equal an empty one sent).
func TestInternalTopicProduceByClientID(t *testing.T) {
	const secret = "fjord-internal-0123456789"
	for _, c := range []struct {
		configured string
		clientID   *string // nil: a null client id
		allowed    bool
	}{
		{secret, kmsg.StringPtr(secret), true},
		{secret, nil, false},
		{secret, kmsg.StringPtr(""), false},
		{secret, kmsg.StringPtr("fjord-http"), false},
		{secret, kmsg.StringPtr(secret[:len(secret)-1]), false},
		{secret, kmsg.StringPtr(secret + "0"), false},
		{secret, kmsg.StringPtr(strings.ToUpper(secret)), false},
		{"", kmsg.StringPtr(""), false},
		{"", nil, false},
	} {
		h := newWireHarness(t, withConfig(func(cfg *Config) { cfg.InternalClientID = c.configured }))
		h.ctrl.addTopic("__fjord_http_idempotency", 1)
		h.ctrl.addTopic("__consumer_offsets", 1)
		h.ctrl.addTopic("orders", 1)
		conn := h.dial()
		label := "null"
		if c.clientID == nil {
			conn.fmt = kmsg.NewRequestFormatter()
		} else {
			conn.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID(*c.clientID))
			label = `"` + *c.clientID + `"`
		}
		for _, topic := range []string{"__fjord_http_idempotency", "__consumer_offsets"} {
			p := producePartition(t, conn.roundTrip(produceReq(9, 1, topic, 0, batch(t, "v", 1))))
			want := kerr.InvalidTopicException.Code
			if c.allowed {
				want = 0
			}
			if p.ErrorCode != want {
				t.Errorf("configured %q, client id %s: produce to %s: %v, want %v",
					c.configured, label, topic, kerr.ErrorForCode(p.ErrorCode), kerr.ErrorForCode(want))
			}
			if !c.allowed && (p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, `"`+topic+`"`)) {
				t.Errorf("configured %q, client id %s: message %v does not name %s", c.configured, label, p.ErrorMessage, topic)
			}
		}
		// Any client id produces to an ordinary topic.
		if p := producePartition(t, conn.roundTrip(produceReq(9, 1, "orders", 0, batch(t, "v", 1)))); p.ErrorCode != 0 {
			t.Errorf("client id %s: produce to orders: %v", label, kerr.ErrorForCode(p.ErrorCode))
		}
	}
}
