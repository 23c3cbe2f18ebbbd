package testcluster

import (
	"fmt"
	"net"
	"sync"
)

// handedOut holds every port this process has given to a node, so two
// nodes (or a node and its own retry) never get the same one even when the
// kernel reuses a just-closed port.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// maxPortAttempts bounds how many listeners freePorts opens looking for
// ports not handed out before.
const maxPortAttempts = 64

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago. All n listeners are held open together so the kernel cannot return
// one port twice; they are closed before returning, which leaves the race
// described in the package doc.
func freePorts(n int) ([]int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = make(map[int]bool)
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for attempt := 0; len(ports) < n; attempt++ {
		if attempt == maxPortAttempts {
			return nil, fmt.Errorf("no free port on 127.0.0.1 after %d listeners", attempt)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %v", err)
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
