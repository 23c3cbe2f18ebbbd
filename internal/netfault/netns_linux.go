package netfault

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// inNamespace runs f on a thread moved into the named network namespace:
// a socket f opens belongs to that namespace for its whole life, whatever
// thread later uses it. f must not start goroutines that open sockets
// (they run on other threads, in the root namespace). The thread returns
// to the root namespace before it is handed back to the runtime; if that
// fails it stays locked, and the runtime ends it with the goroutine.
func inNamespace(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer home.Close()
		target, err := os.Open(filepath.Join(netnsDir, ns))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("namespace %s: %v", ns, err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("entering namespace %s: %v", ns, err)
			return
		}
		ferr := f()
		if err := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leaving namespace %s: %v", ns, err))
			return // still locked: the thread dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// lockNetworks takes the machine-wide lock that makes choosing a subnet
// and claiming it (the bridge's address) one step across processes.
// The kernel drops an flock when its holder dies, so a crashed run never
// leaves it held.
func lockNetworks() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %v", lockPath, err)
	}
	return func() { f.Close() }, nil // closing the last descriptor unlocks
}

// processAlive reports whether pid names a process (of any user).
func processAlive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// delayQueueLen bounds the packets one delayed link holds: beyond it the
// line drops, as a full router queue does. At 1,500 bytes a packet and a
// delay of a second this passes about 100 Mbit/s, plenty for a cluster
// under test.
const delayQueueLen = 8192

// tunLine is a delay line: a tun device in the sending node's namespace,
// which the routes to delayed destinations point at, and a raw socket
// bound to the node's eth0 that sends each packet on once it is due. The
// tun device has no offloads (they are enabled only by TUNSETOFFLOAD), so
// the kernel gives it whole, checksummed IPv4 packets of at most the MTU,
// which the raw socket (IPPROTO_RAW: the header is the packet's own) can
// send as they are. A socket bound to a device ignores routes through
// other devices, so the packet leaves by eth0, not back into the tun.
//
// Threads: one reader per line (read), one sender per destination
// (send); setDelay and close under Network.mu.
type tunLine struct {
	tun  *os.File
	raw  int // the raw socket's descriptor
	done chan struct{}
	wg   sync.WaitGroup

	mu struct {
		sync.Mutex
		queues map[netip.Addr]*delayQueue
	}
}

// delayQueue is one destination's packets, in the order read, each with
// the time it is due: since every packet waits the same d, the due
// times are in order too (until d changes), and the sender sleeps for
// the head only.
type delayQueue struct {
	dst     netip.Addr
	delay   time.Duration // REQUIRES: tunLine.mu held
	packets chan delayedPacket
}

type delayedPacket struct {
	data []byte
	due  time.Time
}

// openDelayLine makes node namespace ns's delay line. The caller sets the
// tun device up and routes destinations through it.
func openDelayLine(ns string) (delayLine, error) {
	l := &tunLine{raw: -1, done: make(chan struct{})}
	l.mu.queues = map[netip.Addr]*delayQueue{}
	err := inNamespace(ns, func() error {
		// Both opened inside the namespace: a tun device is made in the
		// namespace of the descriptor that asks, a socket lives in the
		// one it was made in.
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("/dev/net/tun (the kernel's CONFIG_TUN): %v", err)
		}
		ifr, err := unix.NewIfreq(delayIface)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("making tun device %s: %v", delayIface, err)
		}
		// Non-blocking, so os.File reads through the poller and Close
		// wakes a pending Read. Only now, with the device attached: a
		// tun descriptor polled before TUNSETIFF answers EPOLLERR
		// without joining the wait queue, so the poller would never
		// hear of a packet.
		l.tun = os.NewFile(uintptr(fd), delayIface)
		if l.raw, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
			return fmt.Errorf("raw socket: %v", err)
		}
		if err := unix.SetsockoptString(l.raw, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, nodeIface); err != nil {
			return fmt.Errorf("binding the raw socket to %s: %v", nodeIface, err)
		}
		// Replies from a delayed destination arrive on eth0 while the
		// route back to it names the tun: strict reverse-path filtering
		// would drop them. New namespaces start with it off; make sure.
		for _, iface := range []string{"all", nodeIface} {
			p := "/proc/sys/net/ipv4/conf/" + iface + "/rp_filter"
			if err := os.WriteFile(p, []byte("0"), 0o644); err != nil {
				return fmt.Errorf("turning off reverse-path filtering: %v", err)
			}
		}
		return nil
	})
	if err != nil {
		l.closeFiles()
		return nil, err
	}
	l.wg.Add(1)
	go l.read()
	return l, nil
}

func (l *tunLine) setDelay(dst netip.Addr, d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.mu.queues[dst]; q != nil {
		q.delay = d
		return
	}
	q := &delayQueue{dst: dst, delay: d, packets: make(chan delayedPacket, delayQueueLen)}
	l.mu.queues[dst] = q
	l.wg.Add(1)
	go l.send(q)
}

// read takes each packet the kernel routes into the tun device and queues
// it for its destination, until the device is closed.
func (l *tunLine) read() {
	defer l.wg.Done()
	buf := make([]byte, 1<<16)
	for {
		n, err := l.tun.Read(buf)
		if err != nil {
			return // closed
		}
		// Only IPv4 is routed here; the rest (the tun's own IPv6
		// router solicitations) is dropped.
		if n < 20 || buf[0]>>4 != 4 {
			continue
		}
		dst := netip.AddrFrom4([4]byte(buf[16:20]))
		l.mu.Lock()
		q := l.mu.queues[dst]
		var due time.Time
		if q != nil {
			due = time.Now().Add(q.delay)
		}
		l.mu.Unlock()
		if q == nil {
			continue
		}
		select {
		case q.packets <- delayedPacket{data: append([]byte(nil), buf[:n]...), due: due}:
		default:
			// Full: tail drop.
		}
	}
}

// send sends q's packets on, each once it is due, until the line closes.
func (l *tunLine) send(q *delayQueue) {
	defer l.wg.Done()
	to := &unix.SockaddrInet4{Addr: q.dst.As4()}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		var p delayedPacket
		select {
		case <-l.done:
			return
		case p = <-q.packets:
		}
		if wait := time.Until(p.due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-l.done:
				return
			case <-timer.C:
			}
		}
		// An error is a packet lost on the wire; TCP retransmits it.
		_ = unix.Sendto(l.raw, p.data, 0, to)
	}
}

func (l *tunLine) close() {
	close(l.done)
	if l.tun != nil {
		l.tun.Close() // wakes read; the device and its routes go
	}
	l.wg.Wait()
	if l.raw >= 0 {
		unix.Close(l.raw)
		l.raw = -1
	}
}

// closeFiles releases what a failed open made.
func (l *tunLine) closeFiles() {
	if l.tun != nil {
		l.tun.Close()
	}
	if l.raw >= 0 {
		unix.Close(l.raw)
	}
}
