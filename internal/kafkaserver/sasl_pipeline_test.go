package kafkaserver

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/sasl"
)

// ApiVersions and SaslHandshake pipelined in one write, as a client that
// does not wait for ApiVersions sends them: both are answered, in order.
func TestSASLPipelinedHandshake(t *testing.T) {
	h := saslHarness(t)
	c := h.dial()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, sasl.ScramSHA512
	av := apiVersionsReq(3)
	// Each frame on its own: AppendRequest writes the size at the start
	// of the slice it is given.
	b := append(c.fmt.AppendRequest(nil, av, 1), c.fmt.AppendRequest(nil, hs, 2)...)
	c.write(b)
	if resp := c.recv(av, 1).(*kmsg.ApiVersionsResponse); resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions: error %d", resp.ErrorCode)
	}
	if resp := c.recv(hs, 2).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
		t.Fatalf("SaslHandshake: error %d", resp.ErrorCode)
	}
}
