// Package peers holds a node's franz-go clients to other nodes'
// listeners, one per node id, as the node's own metadata image names
// them: the forwarding control-plane client (to the active controller)
// and the follower fetchers (to leaders) both dial through it. A client
// is made on first use and replaced when the node's registered address
// changes (it restarted on another port).
//
// Threads: every method may be called from any goroutine; the clients
// are kept under one mutex, held only to look up or replace one.
package peers

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/fjordmsg"
)

var (
	// ErrNotRegistered: the image has no listener for the node.
	ErrNotRegistered = errors.New("peers: the node has not registered a listener")
	// ErrClosed: Close was called.
	ErrClosed = errors.New("peers: closed")
)

// dialTimeout bounds connecting to a peer: they are on the same network,
// and a caller retries a peer that does not answer.
const dialTimeout = 2 * time.Second

// Pool is the clients, by node id.
type Pool struct {
	images   controlplane.Images
	clientID string
	// opts are added to every client's options: the inter-broker
	// listener's TLS (and SASL).
	opts []kgo.Opt

	mu     sync.Mutex
	byNode map[int32]conn
	closed bool
}

type conn struct {
	addr string
	cl   *kgo.Client
}

// New returns a Pool that finds nodes in images and names itself with
// clientID (this node's internal client id, so peers know it). opts are
// added to every client's (the inter-broker listener's security).
func New(images controlplane.Images, clientID string, opts ...kgo.Opt) *Pool {
	return &Pool{images: images, clientID: clientID, opts: opts, byNode: map[int32]conn{}}
}

// Broker returns the handle of node's listener; requests through it go
// to that node alone and are not retried.
func (p *Pool) Broker(node int32) (*kgo.Broker, error) {
	b, ok := p.images.Image().Brokers[node]
	if !ok {
		return nil, fmt.Errorf("%w: node %d", ErrNotRegistered, node)
	}
	addr := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	c, ok := p.byNode[node]
	if !ok || c.addr != addr {
		if ok {
			c.cl.Close()
		}
		// Fjord's client options: peers ask each other Fjord's own
		// requests (internal/fjordmsg) as well as Kafka's.
		cl, err := kgo.NewClient(append(append(fjordmsg.ClientOpts(), kgo.SeedBrokers(addr), kgo.ClientID(p.clientID), kgo.DialTimeout(dialTimeout)), p.opts...)...)
		if err != nil {
			delete(p.byNode, node)
			return nil, fmt.Errorf("node %d at %s: %w", node, addr, err)
		}
		c = conn{addr: addr, cl: cl}
		p.byNode[node] = c
	}
	return c.cl.SeedBrokers()[0], nil
}

// Close closes every client; later calls to Broker fail with ErrClosed.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for id, c := range p.byNode {
		c.cl.Close()
		delete(p.byNode, id)
	}
}
