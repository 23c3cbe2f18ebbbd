package e2e

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/fjordmq/fjord/internal/testcluster"
)

// hostileConns is how many unauthenticated connections the flood
// holds open at once.
const hostileConns = 10_000

// TestSecurityHostileInput: a node with SASL_SSL and SASL_PLAINTEXT
// listeners, and an authenticated producer writing through everything
// below: garbage instead of a TLS ClientHello, a ClientHello cut off and
// followed by garbage, a SASL exchange that never finishes, an oversized
// SASL token in a frame and one past the frame bound, and 10,000
// connections that say ApiVersions and never authenticate. Each hostile
// connection is closed (the stalled ones after the 10 s bound); the
// producer is acknowledged throughout; the node's resident memory grows
// by less than 24 KiB per open hostile connection, and returns once the
// node has closed them.
func TestSecurityHostileInput(t *testing.T) {
	t.Parallel()
	raiseFileLimit(t, hostileConns+4096) // each side of a connection is in its own process
	pki := newE2EPKI(t)
	n := testcluster.Start(t, testcluster.Options{
		Listeners: []testcluster.Listener{{Name: "SASL_SSL", Protocol: "SASL_SSL"}, {Name: "SASL_PLAINTEXT", Protocol: "SASL_PLAINTEXT"}},
		// SASL listeners turn allow.everyone.if.no.acl.found off: the
		// PLAINTEXT inter-broker listener's principal, User:ANONYMOUS
		// (the node's own clients and the test's setup), is a super
		// user, as the nodes' principal is in a Kafka cluster, and alice
		// is granted what her producer needs below.
		Args: append(pki.serveArgs("none"), "--sasl-enabled-mechanisms", "SCRAM-SHA-512", "--super-users", "User:ANONYMOUS",
			"--bootstrap-scram-users", "SCRAM-SHA-512=[name=alice,password=alice-secret]"),
	})
	ctx := testContext(t, 3*time.Minute)
	sslAddr, plainAddr := n.ListenerAddr("SASL_SSL"), n.ListenerAddr("SASL_PLAINTEXT")
	adm := newAdmin(t, n)
	createTopic(ctx, t, adm, "hostile-security", 1)
	// WRITE on the topic is all an idempotent producer needs (it implies
	// DESCRIBE for Metadata, and KIP-679 lets WRITE on a topic stand in
	// for IDEMPOTENT_WRITE).
	if _, err := createACLsAll(ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("hostile-security").Operations(kadm.OpWrite)); err != nil {
		t.Fatalf("granting alice WRITE on hostile-security: %v", err)
	}

	// The authenticated producer, acks=all over SASL_SSL, one record
	// every 20 ms until the flood is over.
	producer := newClient(t, addr(sslAddr), kgo.DialTLSConfig(pki.clientTLS(t, nil, pki.caFile)),
		kgo.SASL(kscram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic("hostile-security"), kgo.RequiredAcks(kgo.AllISRAcks()))
	// The grant is in the node's image before the producer starts, so a
	// refusal below would be a real one.
	eventually(t, 5*time.Second, func() error {
		md, err := kadm.NewClient(producer).Metadata(ctx, "hostile-security")
		if err != nil {
			return err
		}
		d, ok := md.Topics["hostile-security"]
		if !ok {
			return errors.New("no hostile-security in alice's metadata")
		}
		return d.Err
	})
	stop := make(chan struct{})
	type produced struct {
		n     int
		worst time.Duration
		err   error
	}
	done := make(chan produced, 1)
	go func() {
		var p produced
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				done <- p
				return
			case <-tick.C:
			}
			start := time.Now()
			if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("while under attack")}).FirstErr(); err != nil {
				p.err = err
				done <- p
				return
			}
			p.n++
			p.worst = max(p.worst, time.Since(start))
		}
	}()

	closed := func(c net.Conn, within time.Duration) error {
		c.SetReadDeadline(time.Now().Add(within))
		_, err := io.Copy(io.Discard, c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("still open after %v", within)
		}
		return nil
	}
	dial := func(a string) net.Conn {
		c, err := net.DialTimeout("tcp", a, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	// Garbage instead of a ClientHello; a ClientHello's first bytes, then
	// garbage.
	for name, b := range map[string][]byte{
		"garbage before the TLS handshake": []byte("\x00\x00\x00\x10GET / HTTP/1.0\r\n\r\n"),
		"garbage during the TLS handshake": append([]byte{0x16, 0x03, 0x01, 0x00, 0x40, 0x01, 0x00, 0x00, 0x3c, 0x03, 0x03}, make([]byte, 80)...),
	} {
		c := dial(sslAddr)
		c.Write(b)
		if err := closed(c, 15*time.Second); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// Oversized tokens: one the SASL layer refuses (a frame within the
	// bound), one in a frame past the bound.
	for name, size := range map[string]int{"token over 64 KiB": 64<<10 + 100, "frame of 1 MiB": 1 << 20} {
		c := dial(plainAddr)
		writeRequest(t, c, 1, saslHandshake(sasl512))
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.Version, auth.SASLAuthBytes = 2, make([]byte, size)
		// The node may close before it has read it all: a failed write
		// is what the test expects then.
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, auth, 2))
		if err := closed(c, 15*time.Second); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	// The flood: connections that say ApiVersions (so each holds its
	// buffers and goroutines) and a SASL exchange that stops after the
	// first message, then nothing.
	rssBefore := residentBytes(t, n.Pid())
	floodStart := time.Now()
	conns := make([]net.Conn, 0, hostileConns)
	answers := make(map[net.Conn]int, hostileConns) // responses each is owed
	var mu sync.Mutex
	var wg sync.WaitGroup
	dialErrs := make(chan error, hostileConns)
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < hostileConns; i += 16 {
				c, err := net.DialTimeout("tcp", plainAddr, 10*time.Second)
				if err != nil {
					dialErrs <- err
					return
				}
				req := kmsg.NewPtrApiVersionsRequest()
				req.Version = 3
				req.ClientSoftwareName, req.ClientSoftwareVersion = "flood", "1"
				frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("flood")).AppendRequest(nil, req, 1)
				if i%10 == 0 {
					// Every tenth also starts a SCRAM exchange and stalls.
					// Its own frame: AppendRequest writes the size at the
					// start of the slice it is given.
					frame = append(frame, kmsg.NewRequestFormatter().AppendRequest(nil, saslHandshake(sasl512), 2)...)
				}
				c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				if _, err := c.Write(frame); err != nil {
					c.Close()
					dialErrs <- err
					return
				}
				mu.Lock()
				conns = append(conns, c)
				answers[c] = 1
				if i%10 == 0 {
					answers[c] = 2 // and the handshake's
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("opened %d connections in %v", hostileConns, time.Since(floodStart))
	close(dialErrs)
	for err := range dialErrs {
		t.Fatalf("opening the flood: %v", err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// The node has read every ApiVersions once each connection has its
	// answer (and every tenth its handshake's): only then is its memory
	// that of the whole flood.
	for i, c := range conns {
		if err := readFrames(c, answers[c], 30*time.Second); err != nil {
			t.Fatalf("flood connection %d: %v", i, err)
		}
	}
	rssFlood := residentBytes(t, n.Pid())
	grown := rssFlood - rssBefore
	t.Logf("node RSS %d MiB before the flood, %d MiB with %d unauthenticated connections open (%d KiB each)",
		rssBefore>>20, rssFlood>>20, len(conns), grown/int64(len(conns))>>10)
	if perConn := grown / int64(len(conns)); perConn > 24<<10 {
		t.Errorf("the node grew by %d bytes per unauthenticated connection, want at most 24 KiB", perConn)
	}

	// Every flood connection is closed by the node within its bound.
	eventually(t, 30*time.Second, func() error {
		open := 0
		buf := make([]byte, 512)
		for _, c := range conns {
			c.SetReadDeadline(time.Now().Add(time.Millisecond))
			for {
				_, err := c.Read(buf)
				if err == nil {
					continue // an answer (ApiVersions, the handshake)
				}
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					open++
				}
				break
			}
		}
		if open > 0 {
			return fmt.Errorf("%d of %d unauthenticated connections still open", open, len(conns))
		}
		return nil
	})

	close(stop)
	p := <-done
	if p.err != nil {
		t.Fatalf("the authenticated producer during the flood: %v (after %d records)", p.err, p.n)
	}
	t.Logf("authenticated producer: %d records acknowledged during the attack, slowest %v", p.n, p.worst)
	if p.n == 0 {
		t.Fatal("the authenticated producer got nothing acknowledged during the attack")
	}
}

const sasl512 = "SCRAM-SHA-512"

func saslHandshake(mechanism string) *kmsg.SASLHandshakeRequest {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mechanism
	return hs
}

// writeRequest writes req on c framed as a Kafka client does.
func writeRequest(t *testing.T, c net.Conn, corr int32, req kmsg.Request) {
	t.Helper()
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("e2e")).AppendRequest(nil, req, corr)); err != nil {
		t.Fatalf("writing %s: %v", kmsg.NameForKey(req.Key()), err)
	}
}

// readFrames reads n response frames from c, each size-prefixed.
func readFrames(c net.Conn, n int, within time.Duration) error {
	c.SetReadDeadline(time.Now().Add(within))
	var size [4]byte
	for range n {
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return err
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
			return err
		}
	}
	return nil
}

// residentBytes is a process's resident set size.
func residentBytes(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for process %d", pid)
	return 0
}

// raiseFileLimit raises this process's open-file limit to at least n
// (the nodes it starts inherit it), raising the hard limit too when it
// may (as root, which CI is).
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	want := lim
	want.Cur = n
	if want.Max < n {
		want.Max = n
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want); err != nil {
		t.Fatalf("raising the open-file limit from %d (hard %d) to %d: %v", lim.Cur, lim.Max, n, err)
	}
}
