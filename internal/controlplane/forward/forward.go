// Package forward is the control-plane Client every node's broker side
// uses (controlplane.Client): it serves a change through this node's own
// controller while this node is the active controller, and otherwise
// sends it to the node that is, over the Kafka protocol, as the request
// a client would send (CreateTopics, DeleteTopics, CreatePartitions,
// AlterConfigs, IncrementalAlterConfigs, ElectLeaders,
// AlterPartitionReassignments, AlterClientQuotas,
// AlterUserScramCredentials, CreateAcls, DeleteAcls, AllocateProducerIds,
// BrokerRegistration),
// or a broker's leader sends (AlterPartition, and Fjord's own
// MarkTopicKeyed, internal/fjordmsg). The
// rules that keep forwarding safe are in controlplane/forwarding.go.
//
// A forwarded change answers once this node's own image includes it (it
// waits for the metadata offset the controller's answer carries), so
// read-your-writes holds through any node. Whatever goes wrong on the way
// (no controller known yet, the controller's listener not registered, a
// dropped connection, the controller moving: NOT_CONTROLLER) is retried
// with a short backoff until the caller's deadline or MaxWait, and then
// answered with a retriable error (NOT_CONTROLLER or REQUEST_TIMED_OUT),
// never a hang.
//
// A retry after a lost connection may repeat a change the controller had
// committed: a CreateTopics then answers TOPIC_ALREADY_EXISTS, as it does
// in Kafka when a client retries.
//
// Threads: every method may be called from any goroutine at once. The
// connections are Config.Peers'.
package forward

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/peers"
)

// DefaultMaxWait bounds a change's retries and its wait for this node's
// image when the caller's context has no sooner deadline: long enough to
// ride out a controller election (about a second), short enough that a
// client hears back well before its own request timeout (30 s).
const DefaultMaxWait = 10 * time.Second

// Retry backoff after NOT_CONTROLLER or a failed connection.
const (
	retryMin = 20 * time.Millisecond
	retryMax = 250 * time.Millisecond
)

// Config configures a Client.
type Config struct {
	// NodeID is this node's id.
	NodeID int32
	// Local is this node's controller: it serves changes while this node
	// is the active controller and answers NOT_CONTROLLER otherwise.
	Local Local
	// Images is this node's metadata image: where the active
	// controller's listener is found, and what a forwarded change waits
	// for.
	Images controlplane.Images
	// Peers dials the active controller's listener as this node's
	// internal client (controlplane.InternalClientID), which tells the
	// controller the request comes from a peer.
	Peers *peers.Pool
	// MaxWait: see DefaultMaxWait (0 takes it).
	MaxWait time.Duration
	// Logger receives connection changes; nil discards.
	Logger *slog.Logger
}

// Local is what a Client needs of this node's own controller.
type Local interface {
	controlplane.Client
	controlplane.ISR
}

// Client is the forwarding control-plane client.
type Client struct {
	cfg Config
	log *slog.Logger

	closed atomic.Bool
	// forwardingTo is the controller last forwarded to, for one log line
	// per change of controller.
	forwardingTo atomic.Int32
}

var (
	_ controlplane.Client = (*Client)(nil)
	_ controlplane.ISR    = (*Client)(nil)
)

// New returns a Client. Close releases its connection.
func New(cfg Config) *Client {
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{cfg: cfg, log: log.With("component", "forward")}
	c.forwardingTo.Store(-1)
	return c
}

// Close makes later forwards answer NOT_CONTROLLER (the node is
// stopping); the connections are Config.Peers', which their owner
// closes.
func (c *Client) Close() { c.closed.Store(true) }

// ControllerID is the active controller's node id, -1 if none is known.
func (c *Client) ControllerID() int32 { return c.cfg.Local.ControllerID() }

// errNoOffset: a controller answered a forwarded change without the
// metadata offset to wait for (a node that does not forward as this one
// does). Retrying would repeat the change, so it is answered as a
// timeout: the change may well be committed.
var errNoOffset = fmt.Errorf("%w: the controller's answer does not say which metadata offset includes the change", controlplane.ErrTimedOut)

// local reports whether this attempt is served by the local controller.
func (c *Client) local(ctx context.Context) bool {
	return controlplane.IsLocalOnly(ctx) || c.ControllerID() == c.cfg.NodeID
}

// bound limits ctx to MaxWait.
func (c *Client) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.MaxWait)
}

// retriable reports whether an attempt's error is worth another one: no
// active controller here or there, or no way to reach it.
func retriable(err error) bool {
	return errors.Is(err, controlplane.ErrNotController)
}

// pause waits out one backoff step; false when ctx ended first.
func pause(ctx context.Context, backoff *time.Duration) bool {
	d := *backoff
	*backoff = min(*backoff*2, retryMax)
	return clock.Sleep(ctx, d)
}

// broker returns the franz-go handle of the active controller's
// listener, found in this node's image; NOT_CONTROLLER when there is no
// controller, it is this node, or it has not registered a listener yet.
func (c *Client) broker() (*kgo.Broker, int32, error) {
	id := c.ControllerID()
	if id < 0 {
		return nil, id, fmt.Errorf("%w: no active controller is known to node %d yet", controlplane.ErrNotController, c.cfg.NodeID)
	}
	if c.closed.Load() {
		return nil, id, fmt.Errorf("%w: node %d is shutting down", controlplane.ErrNotController, c.cfg.NodeID)
	}
	b, err := c.cfg.Peers.Broker(id)
	if err != nil {
		// Not registered yet, or the pool closed: retriable either way.
		return nil, id, fmt.Errorf("%w: the active controller, node %d: %w", controlplane.ErrNotController, id, err)
	}
	if c.forwardingTo.Swap(id) != id {
		c.log.Info("forwarding control-plane changes", "controller", id)
	}
	return b, id, nil
}

// send sends req to the active controller and returns its answer and
// the metadata offset the answer carries (0 if none). A failure to reach
// it is NOT_CONTROLLER: retriable, and what the client would have heard
// from a controller that moved.
func (c *Client) send(ctx context.Context, req kmsg.Request) (kmsg.Response, uint64, error) {
	b, id, err := c.broker()
	if err != nil {
		return nil, 0, err
	}
	resp, err := b.Request(ctx, req)
	if err != nil {
		if errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) || errors.Is(err, kerr.IllegalSaslState) {
			// This node's inter-broker credentials are refused: asking
			// again changes nothing, and an operator must hear it.
			return nil, 0, fmt.Errorf("forwarding %s to controller %d: authenticating to its inter-broker listener: %w (check inter-broker-sasl-username and its password)",
				fjordmsg.NameForKey(req.Key()), id, err)
		}
		if ctx.Err() != nil {
			return nil, 0, fmt.Errorf("%w: forwarding %s to controller %d: %w", controlplane.ErrTimedOut, fjordmsg.NameForKey(req.Key()), id, context.Cause(ctx))
		}
		return nil, 0, fmt.Errorf("%w: forwarding %s to controller %d: %v", controlplane.ErrNotController, fjordmsg.NameForKey(req.Key()), id, err)
	}
	var offset uint64
	if tags := responseTags(resp); tags != nil {
		tags.Each(func(key uint32, val []byte) {
			if key == controlplane.MetadataOffsetTag {
				offset, _ = controlplane.DecodeMetadataOffset(val)
			}
		})
	}
	return resp, offset, nil
}

// responseTags is the top-level tagged fields of a control change's
// response.
func responseTags(resp kmsg.Response) *kmsg.Tags {
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		return &r.UnknownTags
	case *kmsg.DeleteTopicsResponse:
		return &r.UnknownTags
	case *kmsg.CreatePartitionsResponse:
		return &r.UnknownTags
	case *kmsg.AlterConfigsResponse:
		return &r.UnknownTags
	case *kmsg.IncrementalAlterConfigsResponse:
		return &r.UnknownTags
	case *kmsg.AllocateProducerIDsResponse:
		return &r.UnknownTags
	case *kmsg.BrokerRegistrationResponse:
		return &r.UnknownTags
	case *kmsg.AlterPartitionResponse:
		return &r.UnknownTags
	case *kmsg.ElectLeadersResponse:
		return &r.UnknownTags
	case *kmsg.AlterPartitionAssignmentsResponse:
		return &r.UnknownTags
	case *kmsg.AlterClientQuotasResponse:
		return &r.UnknownTags // flexible from v1, which forwarding sends
	case *kmsg.AlterUserSCRAMCredentialsResponse:
		return &r.UnknownTags // flexible from v0
	case *kmsg.CreateACLsResponse:
		return &r.UnknownTags // flexible from v2; forwarding sends v3
	case *kmsg.DeleteACLsResponse:
		return &r.UnknownTags // likewise
	}
	return nil
}

// TagMetadataOffset sets MetadataOffsetTag on a control change's
// response (the controller's side of forwarding); other responses are
// left alone.
func TagMetadataOffset(resp kmsg.Response, offset uint64) {
	if tags := responseTags(resp); tags != nil {
		tags.Set(controlplane.MetadataOffsetTag, controlplane.EncodeMetadataOffset(offset))
	}
}

// await returns once this node's image has reached offset (every
// subscriber has seen it: the replica manager has opened a created
// topic's partitions), or ctx ends.
func (c *Client) await(ctx context.Context, offset uint64) error {
	if offset == 0 {
		return errNoOffset
	}
	if err := c.cfg.Images.AwaitImage(ctx, offset); err != nil {
		return fmt.Errorf("the change is committed at metadata offset %d, which node %d has not applied yet: %w",
			offset, c.cfg.NodeID, err)
	}
	return nil
}

// codeError turns a response's error code and message into the error the
// local controller would have returned (a kerr value, wrapped with the
// controller's message); nil for 0.
func codeError(code int16, msg *string) error {
	err := kerr.ErrorForCode(code)
	if err == nil {
		return nil
	}
	if msg != nil && *msg != "" {
		return fmt.Errorf("%w: %s", err, *msg)
	}
	return err
}

// timeoutMillis is what is left of ctx's deadline, for a request's own
// timeout field.
func timeoutMillis(ctx context.Context) int32 {
	d, ok := ctx.Deadline()
	if !ok {
		return int32(DefaultMaxWait / time.Millisecond)
	}
	return int32(max(time.Until(d), time.Millisecond) / time.Millisecond)
}
