package controller

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/storage/checkpoint"
	"github.com/fjordmq/fjord/internal/vfs"
)

// The quorum id: which controller quorum a metadata log belongs to.
//
// A Raft node takes AppendEntries, RequestVote and InstallSnapshot from
// whoever dials its port; hashicorp/raft compares terms and indexes,
// never whose log an entry is. A voter list that names an address where
// another cluster's controller now listens (a port released and bound
// again, a host reused) therefore lets one quorum's leader replicate its
// log into the other's, and both logs are mixed for good. (It happened
// in CI: a test's new one-voter controller bound a port another
// cluster's controller had just released, and that cluster's leader
// replaced the test's log with its own.) Kafka refuses such requests by
// the cluster id every KRaft RPC carries (INCONSISTENT_CLUSTER_ID).
// Fjord's cluster id cannot: the first active controller commits it
// (active.go), so it exists only after the quorum has formed, and the
// election that forms it is what needs guarding.
//
// The quorum id exists before: it is the first 16 bytes of SHA-256 over
// the voter list the metadata log is bootstrapped with, sorted by node
// id, each entry the id and the address the other voters dial
// (Config.Voters, --controller-quorum-voters, which is the same on every
// node), or this node alone at its bound address for a cluster of one.
// Every voter bootstraps on its own, so a random id would need the very
// agreement it is meant to protect; a hash of the list they are all
// given is the same on every voter without a word exchanged. The Raft
// bootstrap configuration (the log's first entry) is not hashed as it
// stands: it holds each voter's own address as bound (controller-addr),
// which behind NAT or in a container differs from its entry in the
// list, so every voter's would differ. Two quorums have the same id only
// if they were bootstrapped from the same list: the same ids at the same
// addresses. That is also what lets a voter whose disk was lost,
// bootstrapped again from the list, rejoin its own quorum.
//
// Voters and observers that join later (join.go) learn the id from the
// leader's answer to their join request. Every Raft connection opens
// with it (the handshake, join.go), and a node that knows its own id
// refuses a connection that names another.
//
// On disk: quorumIDFile in Config.Dir, one line of 32 lowercase hex
// digits, written atomically (checkpoint.WriteFileAtomic) when the log
// is bootstrapped or the id learned, read at every Open. A metadata
// directory from before the file existed derives the id from its log's
// first entry when that entry can be told to be the bootstrap from
// Config.Voters (derivedQuorumID), and writes the file; otherwise the id
// is unknown, and the node accepts Raft connections as it did before.

// quorumIDFile holds the quorum id in the controller's directory.
const quorumIDFile = "quorum.id"

// quorumIDLen is the id's length in bytes, in the file (hex) and in the
// handshake (raw).
const quorumIDLen = 16

// quorumID names one controller quorum. The zero value is unknown.
type quorumID [quorumIDLen]byte

func (q quorumID) known() bool { return q != quorumID{} }

// String is the id in hex, "unknown" for the zero value.
func (q quorumID) String() string {
	if !q.known() {
		return "unknown"
	}
	return hex.EncodeToString(q[:])
}

// hexOrEmpty is the id in hex, "" when unknown (joinResponse's field).
func (q quorumID) hexOrEmpty() string {
	if !q.known() {
		return ""
	}
	return q.String()
}

// parseQuorumID reads the hex form; it must be a known id.
func parseQuorumID(s string) (quorumID, error) {
	var q quorumID
	if len(s) != 2*quorumIDLen {
		return q, fmt.Errorf("quorum id %q: want %d hex digits", shortString(s), 2*quorumIDLen)
	}
	if _, err := hex.Decode(q[:], []byte(s)); err != nil {
		return quorumID{}, fmt.Errorf("quorum id %q: %v", shortString(s), err)
	}
	if !q.known() {
		return q, fmt.Errorf("quorum id %q: all zeros, which means unknown", s)
	}
	return q, nil
}

// shortString cuts a value for an error message: a message names a bad
// value, it does not echo a hostile one whole.
func shortString(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// quorumIDOf is the id of a metadata log bootstrapped with voters.
// Addresses are compared as the other voters would dial them: an IP
// address in netip's form, a host name in lower case, so one list
// written two ways on two nodes still gives one id.
func quorumIDOf(voters []Voter) quorumID {
	sorted := slices.Clone(voters)
	slices.SortFunc(sorted, func(a, b Voter) int { return cmp.Compare(a.NodeID, b.NodeID) })
	h := sha256.New()
	io.WriteString(h, "fjord controller quorum v1\n")
	for _, v := range sorted {
		fmt.Fprintf(h, "%d@%s\n", v.NodeID, canonicalAddr(v.Addr))
	}
	var q quorumID
	copy(q[:], h.Sum(nil))
	return q
}

func canonicalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		host = ip.String()
	} else {
		host = strings.ToLower(host)
	}
	return net.JoinHostPort(host, port)
}

// bootstrapVoters is the voter list a new metadata log is bootstrapped
// with, as quorumIDOf hashes it: voters as configured, or this node
// alone at the address it bound. This node's own entry keeps its
// configured address, which is the one the other voters hash, even
// though Open puts the bound one in the Raft configuration; only an
// entry left empty (Config allows it: the address is taken as bound)
// gets the bound one.
func bootstrapVoters(voters []Voter, self int32, bound raft.ServerAddress) []Voter {
	if len(voters) == 0 {
		return []Voter{{NodeID: self, Addr: string(bound)}}
	}
	out := slices.Clone(voters)
	for i := range out {
		if out[i].NodeID == self && out[i].Addr == "" {
			out[i].Addr = string(bound)
		}
	}
	return out
}

// derivedQuorumID is the id of a metadata log made before the quorum id
// existed, from first, its entry at index 1 (nil if the log no longer
// holds it), on node self whose Config.Voters is voters; zero when that
// cannot be told safely.
//
// The entry is the bootstrap configuration only if it is a
// configuration at index 1. It holds the voters as they were
// bootstrapped, except that the node that wrote it (this one, or for an
// observer the leader it copied the log from) has its own address as
// bound, which may differ from its entry in the list. So the id is
// derived only when the list is still the one the log was bootstrapped
// with: the same node ids, and every address but this node's own the
// same. Then it is quorumIDOf(voters), what every other voter derives
// too. With no list (a cluster of one) only a log of this node alone
// qualifies. Guessing instead would be worse than not knowing: two
// voters of one quorum that derive different ids refuse each other,
// while an unknown id only leaves the node as open as it was.
func derivedQuorumID(first *raft.Log, self int32, voters []Voter) quorumID {
	if first == nil || first.Index != 1 || first.Type != raft.LogConfiguration {
		return quorumID{}
	}
	servers, ok := decodeConfiguration(first.Data)
	if !ok || len(servers) == 0 {
		return quorumID{}
	}
	logged := make(map[int32]string, len(servers))
	for _, s := range servers {
		id, err := strconv.ParseInt(string(s.ID), 10, 32)
		if err != nil || id < 0 || s.Suffrage != raft.Voter {
			return quorumID{}
		}
		if _, dup := logged[int32(id)]; dup {
			return quorumID{}
		}
		logged[int32(id)] = string(s.Address)
	}
	_, selfLogged := logged[self]
	switch {
	case len(voters) == 0 && (len(logged) != 1 || !selfLogged):
		return quorumID{}
	case len(voters) != 0 && len(voters) != len(logged):
		return quorumID{}
	}
	for _, v := range voters {
		addr, ok := logged[v.NodeID]
		if !ok || (v.NodeID != self && canonicalAddr(addr) != canonicalAddr(v.Addr)) {
			return quorumID{}
		}
	}
	return quorumIDOf(bootstrapVoters(voters, self, raft.ServerAddress(logged[self])))
}

// decodeConfiguration is raft.DecodeConfiguration, which panics on
// damaged input, with the panic turned into false.
func decodeConfiguration(b []byte) (servers []raft.Server, ok bool) {
	defer func() {
		if recover() != nil {
			servers, ok = nil, false
		}
	}()
	return raft.DecodeConfiguration(b).Servers, true
}

// readQuorumIDFile reads dir's quorum id; found is false when there is
// no file. A file that is not exactly what writeQuorumIDFile writes is
// an error: it was damaged, and a guess could make this node refuse its
// own quorum or admit another.
func readQuorumIDFile(dir string) (id quorumID, found bool, err error) {
	path := filepath.Join(dir, quorumIDFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return quorumID{}, false, nil
	}
	if err != nil {
		return quorumID{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 2*quorumIDLen+2))
	if err != nil {
		return quorumID{}, true, fmt.Errorf("reading %s: %w", path, err)
	}
	line, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok {
		return quorumID{}, true, fmt.Errorf("%s is not one line of %d hex digits: fix or remove it (it is derived again from the log where possible)", path, 2*quorumIDLen)
	}
	id, err = parseQuorumID(string(line))
	if err != nil {
		return quorumID{}, true, fmt.Errorf("%s: %v: fix or remove it (it is derived again from the log where possible)", path, err)
	}
	return id, true, nil
}

// writeQuorumIDFile replaces dir's quorum id, durably.
func writeQuorumIDFile(dir string, id quorumID) error {
	if !id.known() {
		panic("writing an unknown quorum id")
	}
	return checkpoint.WriteFileAtomic(vfs.OS(), filepath.Join(dir, quorumIDFile), []byte(id.String()+"\n"))
}

// settleQuorumID decides this node's quorum id before Raft starts, so
// that its first connection already carries it: bootstrapped is the
// voter list of a log Open has just bootstrapped (nil if it did not).
// A log bootstrapped here gets the id of its list; otherwise the file
// says, or the log's first entry (written to the file), or nobody.
// route holds every Raft connection until this has run.
func (c *Controller) settleQuorumID(bootstrapped []Voter) error {
	var id quorumID
	if bootstrapped != nil {
		// Written after the bootstrap: a crash in between leaves a log
		// whose first entry derives the same id at the next start.
		id = quorumIDOf(bootstrapped)
		if err := writeQuorumIDFile(c.cfg.Dir, id); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
	} else {
		var found bool
		var err error
		if id, found, err = readQuorumIDFile(c.cfg.Dir); err != nil {
			return fmt.Errorf("controller: %w", err)
		}
		if !found {
			id = c.deriveQuorumID()
		}
	}
	c.mux.setQuorumID(id)
	return nil
}

// deriveQuorumID derives the id of a log with no quorum.id (written by
// a Fjord from before the file) and writes the file, or logs why the id
// stays unknown.
func (c *Controller) deriveQuorumID() quorumID {
	var first raft.Log
	var entry *raft.Log
	if err := c.store.GetLog(1, &first); err == nil {
		entry = &first
	}
	id := derivedQuorumID(entry, c.cfg.NodeID, c.cfg.Voters)
	switch {
	case id.known():
		if err := writeQuorumIDFile(c.cfg.Dir, id); err != nil {
			// The id is right; the next start derives it again.
			c.log.Warn("derived the controller quorum id from the metadata log but could not write it", "quorum_id", id, "err", err)
		} else {
			c.log.Info("derived the controller quorum id from the metadata log's bootstrap entry", "quorum_id", id)
		}
	case c.cfg.Observer:
		// The leader's answer to its join tells it (joinQuorum).
	default:
		c.log.Warn("the controller quorum id is unknown, so this node accepts Raft connections from any quorum: "+
			"its metadata log no longer starts with the bootstrap entry, or the voter list changed since; "+
			"copy "+quorumIDFile+" from another voter of this quorum to close that", "dir", c.cfg.Dir)
	}
	return id
}

// adoptQuorumID takes the id in a join answer (hex; "" when the leader
// does not know it) from voter addr, which has just admitted this node:
// an unknown id is learned and written, a different one from the id
// this node already has is an error and changes nothing, since this
// node's log belongs to the quorum it names.
func (c *Controller) adoptQuorumID(addr, s string) error {
	if s == "" {
		return nil
	}
	remote, err := parseQuorumID(s)
	if err != nil {
		return fmt.Errorf("voter at %s answered a malformed %v", addr, err)
	}
	own := c.mux.quorumID()
	switch {
	case own == remote:
		return nil
	case own.known():
		return fmt.Errorf("voter at %s belongs to controller quorum %s, but this node's metadata log (%s) to quorum %s: "+
			"--controller-quorum-voters names another cluster's controllers, or the directory is another cluster's",
			addr, remote, c.cfg.Dir, own)
	}
	if err := writeQuorumIDFile(c.cfg.Dir, remote); err != nil {
		// Used all the same; an unknown id at the next start asks again.
		c.log.Warn("learned the controller quorum id but could not write it", "quorum_id", remote, "err", err)
	}
	c.mux.setQuorumID(remote)
	c.log.Info("learned the controller quorum id from the leader", "quorum_id", remote, "voter", addr)
	return nil
}

// refusalLogInterval is how often refusals of one kind from one host are
// logged: a foreign leader redials at every heartbeat, and a warning
// each time would bury everything else.
const refusalLogInterval = time.Minute

// maxRefusalKeys bounds refusalLog's memory: a scan from many addresses
// costs a map of this size at most.
const maxRefusalKeys = 1024

// refusalLog decides which refused Raft connections are logged: the
// first of each key (remote host and the id it named), then one per
// refusalLogInterval, with how many went unlogged between. It does no
// I/O and reads no clock; route calls it under muxLayer.mu.
type refusalLog struct {
	last map[string]refusalEntry
}

type refusalEntry struct {
	at         time.Time // last logged
	suppressed int       // refused since at, not logged
}

// note records a refusal of key at now and reports whether to log it,
// and how many refusals of key went unlogged before it.
func (r *refusalLog) note(key string, now time.Time) (log bool, suppressed int) {
	e, ok := r.last[key]
	if ok && now.Sub(e.at) < refusalLogInterval {
		e.suppressed++
		r.last[key] = e
		return false, 0
	}
	if r.last == nil || (!ok && len(r.last) >= maxRefusalKeys) {
		for k, old := range r.last {
			if now.Sub(old.at) >= refusalLogInterval {
				delete(r.last, k)
			}
		}
		if len(r.last) >= maxRefusalKeys || r.last == nil {
			r.last = make(map[string]refusalEntry)
		}
	}
	r.last[key] = refusalEntry{at: now}
	return true, e.suppressed
}
