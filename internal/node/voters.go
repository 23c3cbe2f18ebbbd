package node

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"unicode"
)

// Voter is one member of the controller quorum, as
// --controller-quorum-voters names it (Kafka's controller.quorum.voters
// entry id@host:port).
type Voter struct {
	NodeID int32
	// Addr is the host:port the other voters dial to reach this one's
	// Raft transport. It is not what the voter binds (controller-addr),
	// which may differ behind NAT or a container's port mapping.
	Addr string
}

// String is the voter's entry in Kafka's format, id@host:port.
func (v Voter) String() string { return strconv.Itoa(int(v.NodeID)) + "@" + v.Addr }

// FormatVoters is the list in Kafka's controller.quorum.voters format,
// which ParseVoters reads back.
func FormatVoters(voters []Voter) string {
	entries := make([]string, len(voters))
	for i, v := range voters {
		entries[i] = v.String()
	}
	return strings.Join(entries, ",")
}

// MaxVoters bounds the controller quorum. Kafka advises 3 or 5 voters:
// every commit and every election waits for a majority of them, so each
// voter more makes both slower and buys no safety past a handful. 64 is
// far past any sensible quorum and keeps a mistaken value (a broker list
// pasted in, a generated list run away) from becoming a quorum that
// cannot elect anyone.
const MaxVoters = 64

// maxHostLength is a DNS name's limit (RFC 1035).
const maxHostLength = 253

// votersExample is the format, for error messages.
const votersExample = "1@controller1:9093,2@controller2:9093,3@controller3:9093"

// ParseVoters reads Kafka's controller.quorum.voters format,
// "id@host:port,id@host:port,...", strictly: no white space, no empty
// entries, ids from 0 to 2147483647 given once each, hosts the other
// voters can dial (a host name or a concrete IP address, IPv6 in
// brackets), ports from 1 to 65535, each address given once, at most
// MaxVoters entries. An empty string is an error, not "no voters": a
// variable that expanded to nothing must not start the node as a cluster
// of one, which would bootstrap a metadata log of its own that later
// voter lists are ignored by. The errors name the bad entry and what is
// allowed, but not the setting: the caller knows whether it was a flag,
// an environment variable or a key in a file.
func ParseVoters(s string) ([]Voter, error) {
	if s == "" {
		return nil, fmt.Errorf("empty: allowed: id@host:port entries separated by commas, e.g. %s (leave it unset for a cluster of one)", votersExample)
	}
	// Counted before splitting, so a hostile value costs no allocation
	// per entry.
	if n := strings.Count(s, ",") + 1; n > MaxVoters {
		return nil, fmt.Errorf("%d entries: allowed: at most %d voters", n, MaxVoters)
	}
	entries := strings.Split(s, ",")
	voters := make([]Voter, len(entries))
	for i, e := range entries {
		v, err := parseVoter(e, i, len(entries))
		if err != nil {
			return nil, err
		}
		voters[i] = v
	}
	if err := checkVoters(voters, entries); err != nil {
		return nil, err
	}
	return voters, nil
}

// parseVoter reads one entry's id@host:port; checkVoters judges the
// address.
func parseVoter(e string, i, n int) (Voter, error) {
	if e == "" {
		return Voter{}, fmt.Errorf("entry %d of %d is empty: allowed: id@host:port entries separated by single commas, none before the first or after the last", i+1, n)
	}
	for _, r := range e {
		switch {
		case unicode.IsSpace(r):
			return Voter{}, fmt.Errorf("entry %s contains white space: allowed: id@host:port with no spaces, e.g. 1@controller1:9093", shortQuote(e))
		case r < 0x21 || r > 0x7e:
			return Voter{}, fmt.Errorf("entry %s contains %U: allowed: printable ASCII, id@host:port", shortQuote(e), r)
		}
	}
	id, addr, ok := strings.Cut(e, "@")
	if !ok || strings.Contains(addr, "@") {
		return Voter{}, fmt.Errorf("entry %s: want id@host:port, e.g. 1@controller1:9093", shortQuote(e))
	}
	// Digits only: ParseInt would take "+1", which is no one's node id.
	nodeID, err := strconv.ParseInt(id, 10, 32)
	if err != nil || id == "" || strings.Trim(id, "0123456789") != "" {
		return Voter{}, fmt.Errorf("entry %s: id %s is not a node id (allowed: 0 to 2147483647)", shortQuote(e), shortQuote(id))
	}
	return Voter{NodeID: int32(nodeID), Addr: addr}, nil
}

// checkVoters checks the list as a whole and each voter's address:
// entries are the voters as the user wrote them, for the messages (nil:
// Voter.String, for a Config built in code).
func checkVoters(voters []Voter, entries []string) error {
	if len(voters) > MaxVoters {
		return fmt.Errorf("%d voters: allowed: at most %d", len(voters), MaxVoters)
	}
	entry := func(i int) string {
		if entries != nil {
			return entries[i]
		}
		return voters[i].String()
	}
	byID := make(map[int32]int, len(voters))
	byAddr := make(map[string]int, len(voters))
	for i, v := range voters {
		if v.NodeID < 0 {
			return fmt.Errorf("entry %s: id %d is not a node id (allowed: 0 to 2147483647)", shortQuote(entry(i)), v.NodeID)
		}
		key, err := dialAddrKey(v.Addr)
		if err != nil {
			return fmt.Errorf("entry %s: %v", shortQuote(entry(i)), err)
		}
		if j, ok := byID[v.NodeID]; ok {
			return fmt.Errorf("node id %d is given twice (%s and %s): allowed: each node id once",
				v.NodeID, shortQuote(entry(j)), shortQuote(entry(i)))
		}
		byID[v.NodeID] = i
		if j, ok := byAddr[key]; ok {
			return fmt.Errorf("address %s is given twice (%s and %s): allowed: each voter its own address",
				key, shortQuote(entry(j)), shortQuote(entry(i)))
		}
		byAddr[key] = i
	}
	return nil
}

// dialAddrKey checks that addr is a host:port another voter can dial and
// returns it in a canonical form (host name in lower case, IP address as
// netip prints it), so one address written two ways is seen as one.
func dialAddrKey(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("want host:port after the @, e.g. 1@controller1:9093 (an IPv6 address in brackets: 1@[2001:db8::1]:9093)")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 || strings.Trim(port, "0123456789") != "" {
		return "", fmt.Errorf("port %s: allowed: 1 to 65535", shortQuote(port))
	}
	if host == "" {
		return "", errors.New("the host is empty: allowed: a host name or an IP address the other voters can dial")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.IsUnspecified() {
			return "", fmt.Errorf("%s is not an address the other voters can dial: allowed: a host name or a concrete IP address", host)
		}
		host = ip.String()
	} else {
		if len(host) > maxHostLength || strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != "" {
			return "", fmt.Errorf("host %s is neither an IP address nor a host name (allowed: at most %d letters, digits, '.', '-' and '_')",
				shortQuote(host), maxHostLength)
		}
		host = strings.ToLower(host)
	}
	return net.JoinHostPort(host, strconv.FormatUint(p, 10)), nil
}

// shortQuote quotes s for an error message, cut to its first 64 bytes: a
// message names the bad value, it does not echo a hostile one whole.
func shortQuote(s string) string {
	const limit = 64
	if len(s) <= limit {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:limit]) + fmt.Sprintf("... (%d bytes)", len(s))
}
