package controller

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
// is in the configuration already and asks nothing, unless it does not
// know its quorum id (below), which the answer tells it.
//
// The quorum handshake: every Raft connection a Fjord node dials opens
// with quorumHelloByte and the dialer's quorum id (quorumid.go: a hash
// of the voter list the metadata log was bootstrapped with; all zeros
// when the dialer does not know it), then hashicorp/raft's bytes:
//
//	0xF2 | quorum id (16 bytes) | raft RPC type (0-4) | msgpack ... | ...
//
// hashicorp/raft takes RPCs from whoever dials, whatever log they come
// from, so without this a leader whose voter list names an address
// where another cluster's controller now listens replicates its log
// into that cluster's quorum (quorumid.go tells how it happened). The
// accepting side, once it knows its own id, closes a connection that
// names another known id, or that opens with a Raft RPC type and no
// hello at all: every Fjord node sends the hello, so such a connection
// is from a Fjord older than the handshake or not from Fjord. A node
// that does not know its own id (a new observer before its join is
// answered; a log from before the id whose bootstrap entry a snapshot
// has removed) has nothing to compare with and accepts every
// connection, as before the handshake. A hello of all zeros is accepted
// everywhere: it comes from such a node, most likely a voter of this
// very quorum, and refusing it would cut that voter off from its own
// quorum; what the handshake refuses is a dialer that names another
// quorum, which one that knows its id always does. The id is checked
// once per connection, not per RPC: hashicorp/raft dials a connection
// for one address and never hands it to another.
//
// A Fjord from before the handshake takes 0xF2 for an unknown RPC type
// and drops the connection, and an upgraded node that knows its id
// refuses the old one's in turn: during a rolling upgrade across this
// change the old and the upgraded voters are two camps that cannot
// reach each other, and the metadata log commits only while one camp
// holds a majority (upgrade one voter at a time, waiting for it to
// lead or follow again), and upgraded brokers follow the log only once
// the leader is upgraded too.
//
// Refusals are logged at WARN, the first from each host and id and
// then once a minute (refusalLog), since the other leader redials at
// every heartbeat. Anything else on the port (an unknown first byte, a
// hello cut short) is closed without an answer.
//
// With TransportTLS (transport_tls.go) all of the above runs inside a
// mutual TLS connection whose peer Admit accepted; a connection that
// fails the handshake or Admit is closed before its first byte is read,
// and logged like the refusals above.

// joinRequestByte opens a join request on the controller port.
const joinRequestByte = 0xF1

// quorumHelloByte opens the quorum handshake of a Raft connection.
const quorumHelloByte = 0xF2

// maxRaftRPCType is the highest first byte of hashicorp/raft's own
// connections (rpcAppendEntries 0 ... rpcRequestPreVote 4, v1.8.0).
const maxRaftRPCType = 4

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
	// QuorumID is the quorum's id in hex (quorumid.go), when the node
	// was admitted and the leader knows it: a new observer, or a voter
	// that starts as one, learns it here. A leader from before the id
	// leaves it out.
	QuorumID string `json:"quorum_id,omitempty"`
}

// muxLayer is the Raft transport's stream layer: a TCP listener whose
// connections go to Raft, after the quorum handshake, except join
// requests, which go to join.
type muxLayer struct {
	ln        net.Listener
	advertise net.Addr
	log       *slog.Logger
	// tls, when set, secures every connection (transport_tls.go).
	tls       *TransportTLS
	raftConns chan net.Conn
	closed    chan struct{}
	closeOnce sync.Once
	// settled is closed when Open has decided this node's quorum id
	// (setQuorumID): route holds Raft connections until then, so that
	// none that arrives while the controller opens is admitted on an id
	// not yet read.
	settled    chan struct{}
	settleOnce sync.Once

	mu struct {
		sync.Mutex
		join func(net.Conn) // nil until the controller is open
		// id is this node's quorum id, zero while unknown. Set once by
		// Open; an observer's may then go from unknown to known
		// (adoptQuorumID), never from one known id to another.
		id       quorumID
		refusals refusalLog
	}
}

func newMuxLayer(addr string, log *slog.Logger, sec *TransportTLS) (*muxLayer, error) {
	if sec != nil {
		if err := sec.check(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	tcp, ok := ln.Addr().(*net.TCPAddr)
	if !ok || tcp.IP == nil || tcp.IP.IsUnspecified() {
		ln.Close()
		return nil, fmt.Errorf("%s is not an address other voters can dial", ln.Addr())
	}
	m := &muxLayer{ln: ln, advertise: tcp, log: log, tls: sec, raftConns: make(chan net.Conn),
		closed: make(chan struct{}), settled: make(chan struct{})}
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

// route reads a connection's first byte (and the handshake, if it opens
// with one) and hands it on, or closes it. With TLS, the TLS handshake
// and Admit come first.
func (m *muxLayer) route(c net.Conn) {
	if m.tls != nil {
		tc, kind, err := m.tls.serverHandshake(c, joinReadTimeout)
		if err != nil {
			m.refuseTLS(c, kind, err)
			c.Close()
			return
		}
		c = tc
	}
	c.SetReadDeadline(time.Now().Add(joinReadTimeout))
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		c.Close()
		return
	}
	var conn net.Conn
	var remote quorumID
	hello := false
	switch {
	case first[0] == joinRequestByte:
		c.SetReadDeadline(time.Time{})
		m.mu.Lock()
		join := m.mu.join
		m.mu.Unlock()
		if join == nil {
			writeJoinResponse(c, joinResponse{Error: "the controller is still starting"})
			c.Close()
			return
		}
		join(c)
		return
	case first[0] == quorumHelloByte:
		if _, err := io.ReadFull(c, remote[:]); err != nil { // cut short
			c.Close()
			return
		}
		conn, hello = c, true
	case first[0] <= maxRaftRPCType:
		conn = &peekedConn{Conn: c, first: first[0]}
	default:
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	select {
	case <-m.settled:
	case <-m.closed:
		c.Close()
		return
	}
	if !m.admit(c, hello, remote) {
		c.Close()
		return
	}
	select {
	case m.raftConns <- conn:
	case <-m.closed:
		c.Close()
	}
}

// admitRaft decides whether a Raft connection may reach Raft: own is
// this node's quorum id, hello whether the connection opened with the
// handshake, remote the id it named (zero: the dialer does not know).
// The rules are join.go's comment block's.
func admitRaft(own quorumID, hello bool, remote quorumID) bool {
	switch {
	case !own.known():
		return true
	case !hello:
		return false // every Fjord node sends the hello
	}
	return !remote.known() || remote == own
}

// admit applies admitRaft to c and logs a refusal, rate-limited.
func (m *muxLayer) admit(c net.Conn, hello bool, remote quorumID) bool {
	m.mu.Lock()
	own := m.mu.id
	if admitRaft(own, hello, remote) {
		m.mu.Unlock()
		return true
	}
	host := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	kind := "no-hello"
	if hello {
		kind = remote.String()
	}
	log, suppressed := m.mu.refusals.note(host+" "+kind, time.Now())
	m.mu.Unlock()
	switch {
	case !log:
	case hello:
		m.log.Warn("refused a Raft connection from another controller quorum: its voter list names this node's address",
			"remote_addr", c.RemoteAddr(), "quorum_id", own, "remote_quorum_id", remote, "refused_unlogged", suppressed)
	default:
		m.log.Warn("refused a Raft connection that did not name its controller quorum (a Fjord from before the quorum handshake, or not Fjord)",
			"remote_addr", c.RemoteAddr(), "quorum_id", own, "refused_unlogged", suppressed)
	}
	return false
}

// refuseTLS logs, rate-limited, a connection refused by the TLS
// handshake or Admit (kind says which).
func (m *muxLayer) refuseTLS(c net.Conn, kind string, err error) {
	host := c.RemoteAddr().String()
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	m.mu.Lock()
	log, suppressed := m.mu.refusals.note(host+" "+kind, time.Now())
	m.mu.Unlock()
	if !log {
		return
	}
	if kind == "tls-admit" {
		m.log.Warn("refused a controller connection: its certificate verified but may not speak to the controller quorum",
			"remote_addr", c.RemoteAddr(), "err", err, "refused_unlogged", suppressed)
		return
	}
	m.log.Warn("refused a controller connection: no TLS handshake with a certificate this node trusts",
		"remote_addr", c.RemoteAddr(), "err", err, "refused_unlogged", suppressed)
}

func (m *muxLayer) setJoin(f func(net.Conn)) {
	m.mu.Lock()
	m.mu.join = f
	m.mu.Unlock()
}

// setQuorumID sets this node's quorum id (zero: unknown). The first
// call lets route admit Raft connections.
func (m *muxLayer) setQuorumID(id quorumID) {
	m.mu.Lock()
	m.mu.id = id
	m.mu.Unlock()
	m.settleOnce.Do(func() { close(m.settled) })
}

func (m *muxLayer) quorumID() quorumID {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.id
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

// Dial implements raft.StreamLayer: it opens the connection (TLS first,
// when set) with the quorum handshake, which hashicorp/raft's bytes
// follow.
func (m *muxLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := m.tls.dial(string(addr), timeout)
	if err != nil {
		return nil, err
	}
	id := m.quorumID()
	if timeout > 0 {
		c.SetWriteDeadline(time.Now().Add(timeout))
	}
	if _, err := c.Write(append([]byte{quorumHelloByte}, id[:]...)); err != nil {
		c.Close()
		return nil, err
	}
	c.SetWriteDeadline(time.Time{})
	return c, nil
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
	resp := c.join(req)
	if resp.Error == "" {
		resp.QuorumID = c.mux.quorumID().hexOrEmpty()
	}
	writeJoinResponse(conn, resp)
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

// askToJoin sends one join request to addr, over TLS when sec is set.
func askToJoin(addr string, req joinRequest, sec *TransportTLS) (joinResponse, error) {
	conn, err := sec.dial(addr, joinReadTimeout)
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
// voter names, to add this node. An observer that does not know its
// quorum id asks until one voter has admitted it, even when its
// configuration lists it already, since the admitting answer carries
// the id (adoptQuorumID).
func (c *Controller) joinQuorum() {
	defer c.joins.Done()
	req := joinRequest{NodeID: c.cfg.NodeID, Addr: string(c.trans.LocalAddr())}
	var last error
	admitted := false
	for round := 0; ; round++ {
		if c.inConfiguration() && (admitted || c.mux.quorumID().known()) {
			c.log.Info("following the metadata log as an observer (broker-only node)", "node_id", c.cfg.NodeID,
				"quorum_id", c.mux.quorumID())
			return
		}
		targets := make([]string, 0, len(c.cfg.Voters))
		for _, v := range c.cfg.Voters {
			targets = append(targets, v.Addr)
		}
	ask:
		for i := 0; i < len(targets); i++ {
			resp, err := askToJoin(targets[i], req, c.mux.tls)
			switch {
			case err != nil:
				last = fmt.Errorf("voter at %s: %w", targets[i], err)
			case resp.Error == "":
				if last = c.adoptQuorumID(targets[i], resp.QuorumID); last == nil {
					admitted = true
					break ask
				}
			case resp.Leader != "" && len(targets) < 2*len(c.cfg.Voters):
				targets = append(targets, resp.Leader)
				last = errors.New(resp.Error)
			default:
				last = fmt.Errorf("voter at %s: %s", targets[i], resp.Error)
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
