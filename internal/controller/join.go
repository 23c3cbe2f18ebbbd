package controller

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Observers: a broker-only node (--process-roles broker) follows the
// metadata log without a vote, so a cluster can have three voters and
// any number of brokers. Kafka's observers fetch the log from the
// leader without being in its voter set; hashicorp/raft replicates only
// to members of its configuration, so an observer is a member with
// raft.Nonvoter suffrage, which the leader adds (AddNonvoter) when the
// observer asks.
//
// The observer knows the voters' controller addresses only (the same
// --controller-quorum-voters every node has), and those ports speak
// Raft. So the port carries one more kind of connection: one whose
// first byte is joinRequestByte (hashicorp/raft's own RPC types are 0
// to 4) is a join request, a JSON line {node_id, addr}, answered with a
// JSON line {error, leader}. A voter that is not the leader answers
// with the leader's address, which the observer asks next. Consul
// shares its Raft port with its own RPC the same way.
//
// An observer asks until its own configuration (which it has from the
// log once the leader replicates to it) lists it; a restarted observer
// is in the configuration already and asks nothing.

// joinRequestByte opens a join request on the controller port.
const joinRequestByte = 0xF1

// Join request bounds: a request is one short line, read within
// joinReadTimeout; AddNonvoter is given joinCommitTimeout.
const (
	maxJoinRequest    = 1024
	joinReadTimeout   = 5 * time.Second
	joinCommitTimeout = 5 * time.Second
	// joinRetry is the pause between two rounds of asking every voter.
	joinRetry = 200 * time.Millisecond
)

type joinRequest struct {
	NodeID int32  `json:"node_id"`
	Addr   string `json:"addr"`
}

type joinResponse struct {
	// Error is empty when the node is (now) an observer.
	Error string `json:"error,omitempty"`
	// Leader is the current leader's controller address, when the
	// answering voter is not it and knows it.
	Leader string `json:"leader,omitempty"`
}

// muxLayer is the Raft transport's stream layer: a TCP listener whose
// connections go to Raft, except join requests, which go to join.
type muxLayer struct {
	ln        net.Listener
	advertise net.Addr
	raftConns chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once

	mu   sync.Mutex
	join func(net.Conn) // nil until the controller is open
}

func newMuxLayer(addr string) (*muxLayer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%s is not an address other voters can dial", ln.Addr())
	}
	m := &muxLayer{ln: ln, advertise: tcp, raftConns: make(chan net.Conn), closed: make(chan struct{})}
	go m.serve()
	return m, nil
}

func (m *muxLayer) serve() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			m.Close()
			return
		}
		go m.route(c)
	}
}

// route reads a connection's first byte and hands it on.
func (m *muxLayer) route(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(joinReadTimeout))
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	if first[0] == joinRequestByte {
		m.mu.Lock()
		join := m.join
		m.mu.Unlock()
		if join == nil {
			writeJoinResponse(c, joinResponse{Error: "the controller is still starting"})
			c.Close()
			return
		}
		join(c)
		return
	}
	select {
	case m.raftConns <- &peekedConn{Conn: c, first: first[0]}:
	case <-m.closed:
		c.Close()
	}
}

func (m *muxLayer) setJoin(f func(net.Conn)) {
	m.mu.Lock()
	m.join = f
	m.mu.Unlock()
}

// Accept implements net.Listener for Raft.
func (m *muxLayer) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftConns:
		return c, nil
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

func (m *muxLayer) Close() error {
	var err error
	m.closeOnce.Do(func() {
		close(m.closed)
		err = m.ln.Close()
	})
	return err
}

func (m *muxLayer) Addr() net.Addr { return m.advertise }

// Dial implements raft.StreamLayer.
func (m *muxLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

// peekedConn is a connection whose first byte route has read.
type peekedConn struct {
	net.Conn
	first byte
	read  bool
}

func (p *peekedConn) Read(b []byte) (int, error) {
	if !p.read && len(b) > 0 {
		p.read = true
		b[0] = p.first
		return 1, nil
	}
	return p.Conn.Read(b)
}

func writeJoinResponse(c net.Conn, r joinResponse) {
	b, _ := json.Marshal(r)
	c.SetWriteDeadline(time.Now().Add(joinReadTimeout))
	c.Write(append(b, '\n'))
}

// handleJoin answers one join request: on the leader it adds the node
// as a nonvoter (or updates its address); elsewhere it names the leader.
// A malformed or oversized request, or one from a voter's id, is
// refused with a message and changes nothing.
func (c *Controller) handleJoin(conn net.Conn) {
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(joinReadTimeout))
	line, err := bufio.NewReaderSize(io.LimitReader(conn, maxJoinRequest), maxJoinRequest).ReadSlice('\n')
	if err != nil {
		writeJoinResponse(conn, joinResponse{Error: fmt.Sprintf("malformed join request (one JSON line of at most %d bytes): %v", maxJoinRequest, err)})
		return
	}
	var req joinRequest
	if err := json.Unmarshal(line, &req); err != nil {
		writeJoinResponse(conn, joinResponse{Error: fmt.Sprintf("malformed join request: %v", err)})
		return
	}
	writeJoinResponse(conn, c.join(req))
}

func (c *Controller) join(req joinRequest) joinResponse {
	if req.NodeID < 0 {
		return joinResponse{Error: fmt.Sprintf("node id %d (allowed: >= 0)", req.NodeID)}
	}
	if host, port, err := net.SplitHostPort(req.Addr); err != nil || host == "" || port == "" {
		return joinResponse{Error: fmt.Sprintf("address %q is not host:port", req.Addr)}
	}
	addr, leader := c.raft.LeaderWithID()
	if leader != raft.ServerID(strconv.Itoa(int(c.cfg.NodeID))) || c.raft.State() != raft.Leader {
		return joinResponse{Error: "not the leader", Leader: string(addr)}
	}
	cfg, err := c.configuration()
	if err != nil {
		return joinResponse{Error: err.Error()}
	}
	id := raft.ServerID(strconv.Itoa(int(req.NodeID)))
	for _, s := range cfg.Servers {
		if s.ID != id {
			continue
		}
		if s.Suffrage == raft.Voter {
			return joinResponse{Error: fmt.Sprintf("node %d is a voter of the controller quorum; a broker-only node needs an id of its own", req.NodeID)}
		}
		if s.Address == raft.ServerAddress(req.Addr) {
			return joinResponse{} // already an observer there
		}
	}
	if err := c.raft.AddNonvoter(id, raft.ServerAddress(req.Addr), 0, joinCommitTimeout).Error(); err != nil {
		return joinResponse{Error: fmt.Sprintf("adding node %d as an observer: %v", req.NodeID, err)}
	}
	c.log.Info("added a broker-only node to the metadata log's observers", "node_id", req.NodeID, "addr", req.Addr)
	return joinResponse{}
}

// askToJoin sends one join request to addr.
func askToJoin(addr string, req joinRequest) (joinResponse, error) {
	conn, err := net.DialTimeout("tcp", addr, joinReadTimeout)
	if err != nil {
		return joinResponse{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(joinReadTimeout + joinCommitTimeout))
	b, _ := json.Marshal(req)
	if _, err := conn.Write(append([]byte{joinRequestByte}, append(b, '\n')...)); err != nil {
		return joinResponse{}, err
	}
	line, err := bufio.NewReaderSize(io.LimitReader(conn, maxJoinRequest), maxJoinRequest).ReadSlice('\n')
	if err != nil {
		return joinResponse{}, err
	}
	var resp joinResponse
	if err := json.Unmarshal(line, &resp); err != nil {
		return joinResponse{}, fmt.Errorf("malformed join answer: %w", err)
	}
	return resp, nil
}

// inConfiguration reports whether this node is in the Raft
// configuration it knows.
func (c *Controller) inConfiguration() bool {
	cfg, err := c.configuration()
	if err != nil {
		return false
	}
	id := raft.ServerID(strconv.Itoa(int(c.cfg.NodeID)))
	return slices.ContainsFunc(cfg.Servers, func(s raft.Server) bool { return s.ID == id })
}

// joinQuorum runs on an observer until its configuration lists it or
// the controller closes: every round asks each voter, and the leader a
// voter names, to add this node.
func (c *Controller) joinQuorum() {
	defer c.joins.Done()
	req := joinRequest{NodeID: c.cfg.NodeID, Addr: string(c.trans.LocalAddr())}
	var last error
	for round := 0; ; round++ {
		if c.inConfiguration() {
			c.log.Info("following the metadata log as an observer (broker-only node)", "node_id", c.cfg.NodeID)
			return
		}
		targets := make([]string, 0, len(c.cfg.Voters))
		for _, v := range c.cfg.Voters {
			targets = append(targets, v.Addr)
		}
		for i := 0; i < len(targets); i++ {
			resp, err := askToJoin(targets[i], req)
			switch {
			case err != nil:
				last = fmt.Errorf("voter at %s: %w", targets[i], err)
			case resp.Error == "":
				last = nil
			case resp.Leader != "" && len(targets) < 2*len(c.cfg.Voters):
				targets = append(targets, resp.Leader)
				last = errors.New(resp.Error)
			default:
				last = fmt.Errorf("voter at %s: %s", targets[i], resp.Error)
			}
			if err == nil && resp.Error == "" {
				break
			}
		}
		if last != nil && round%25 == 24 {
			c.log.Warn("asking the controller quorum to follow its metadata log", "node_id", c.cfg.NodeID, "err", last)
		}
		select {
		case <-c.closing:
			return
		case <-time.After(joinRetry):
		}
	}
}
