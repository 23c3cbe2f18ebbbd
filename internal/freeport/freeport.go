// Package freeport finds TCP ports for nodes that are started later and
// restarted on the same ports: fjord dev, fjord bench --local, fjord
// verify --local and the test clusters.
//
// Asking the kernel for port 0 is the usual way, and the wrong one for
// a node that is killed and started again on its ports: the kernel hands
// out its ephemeral range (net.ipv4.ip_local_port_range) both to
// listeners on port 0 and to the source ports of outgoing connections,
// and it hands a just-freed port out again readily. A port a killed
// node has just let go is then taken by the next test in another
// package that listens on port 0, or by any outgoing connection, and
// the node cannot come back. (It happened: a test's one-node controller
// got a dev cluster's controller port while that node was restarting,
// and the dev cluster's leader replicated to it.)
//
// So Take picks ports outside the ephemeral range, which the kernel
// never hands out by itself; only a process that names a port can take
// one. Take picks at random and checks each by listening, so two
// processes using it rarely meet, and one process never gets a port
// twice.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// lowest is the lowest port Take picks: below it are the ports
// services are configured on by hand (Kafka's 9092, Fjord's defaults).
const lowest = 10000

// minRange is the fewest ports a range outside the ephemeral one must
// have for Take to use it; with less, Take asks the kernel instead.
const minRange = 2000

// maxAttempts bounds the listeners Take opens per port it returns.
const maxAttempts = 64

// handedOut is every port this process was given, so that one process
// never gets the same port twice, even after its node has stopped.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// Take returns n distinct ports on host (an IP address) that were free
// a moment ago. The caller binds them a moment later; another process
// that names one of them in between wins, so a caller retries with new
// ports when a bind says the address is in use.
func Take(host string, n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = make(map[int]bool)
	}
	// Every listener is held until the end, so the n ports are
	// distinct even when the kernel picks them.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	lo, hi, pick := pickRange()
	ports := make([]int, 0, n)
	for attempt := 0; len(ports) < n; attempt++ {
		if attempt == maxAttempts*n {
			return nil, fmt.Errorf("no free port on %s after %d tries", host, attempt)
		}
		port := 0
		if pick {
			port = lo + rand.IntN(hi-lo+1)
			if handedOut.ports[port] {
				continue
			}
		}
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			if pick {
				continue // taken: try another
			}
			return nil, fmt.Errorf("finding a free port on %s: %v", host, err)
		}
		held = append(held, l)
		p := l.Addr().(*net.TCPAddr).Port
		if handedOut.ports[p] {
			continue
		}
		ports = append(ports, p)
	}
	for _, p := range ports {
		handedOut.ports[p] = true
	}
	return ports, nil
}

// pickRange is the range Take picks ports from, and false when it should
// ask the kernel (port 0) instead.
func pickRange() (lo, hi int, ok bool) {
	elo, ehi, err := ephemeralRange()
	if err != nil {
		return 0, 0, false
	}
	return rangeOutside(elo, ehi)
}

// rangeOutside is the larger of the ranges below and above the
// ephemeral range elo-ehi, from lowest up, if it has minRange ports.
func rangeOutside(elo, ehi int) (lo, hi int, ok bool) {
	below := elo - lowest // ports lowest .. elo-1
	above := 65535 - ehi  // ports ehi+1 .. 65535
	switch {
	case below >= above && below >= minRange:
		return lowest, elo - 1, true
	case above > below && above >= minRange:
		return max(ehi+1, lowest), 65535, true
	}
	return 0, 0, false
}

// ephemeralRange reads the kernel's ephemeral port range. Where there is
// no such file (not Linux), the IANA range most systems use.
func ephemeralRange() (lo, hi int, err error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if os.IsNotExist(err) {
		return 49152, 65535, nil
	}
	if err != nil {
		return 0, 0, err
	}
	return parseRange(string(b))
}

func parseRange(s string) (lo, hi int, err error) {
	f := strings.Fields(s)
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("ephemeral port range %q: want two numbers", s)
	}
	if lo, err = strconv.Atoi(f[0]); err != nil {
		return 0, 0, err
	}
	if hi, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, err
	}
	if lo < 1 || hi > 65535 || lo > hi {
		return 0, 0, fmt.Errorf("ephemeral port range %q is not a range of ports", s)
	}
	return lo, hi, nil
}
