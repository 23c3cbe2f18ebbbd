package limits

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// TCPOptions shape one loopback TCP run.
type TCPOptions struct {
	// TotalBytes is how much the sender writes; the last write is short
	// when BlockBytes does not divide it.
	TotalBytes int64
	BlockBytes int64
}

// LoopbackTCP sends o.TotalBytes from a sender goroutine to a receiver
// over a TCP connection on 127.0.0.1, in writes of o.BlockBytes, and
// times it at the receiver: from the moment it tells the sender to start
// until it has read the last byte. The receiver reads into one reused
// buffer of o.BlockBytes and does nothing else with the bytes, so this
// is the most a broker's connection can take in on this machine.
func LoopbackTCP(ctx context.Context, o TCPOptions) (Sample, error) {
	if o.TotalBytes < 1 || o.BlockBytes < 1 {
		return Sample{}, fmt.Errorf("%w: TCP total %d, block %d", ErrInvalidConfig, o.TotalBytes, o.BlockBytes)
	}
	block := randomBytes(int(min(o.BlockBytes, o.TotalBytes)))
	send := func(w io.Writer) error {
		for sent := int64(0); sent < o.TotalBytes; {
			n, err := w.Write(block[:min(int64(len(block)), o.TotalBytes-sent)])
			sent += int64(n)
			if err != nil {
				return err
			}
		}
		return nil
	}
	buf := make([]byte, o.BlockBytes)
	var elapsed time.Duration
	var received int64
	receive := func(r io.Reader) error {
		start := time.Now()
		defer func() { elapsed = time.Since(start) }()
		for received < o.TotalBytes {
			n, err := r.Read(buf)
			received += int64(n)
			if err != nil {
				if errors.Is(err, io.EOF) {
					return fmt.Errorf("sender stopped after %d of %d bytes", received, o.TotalBytes)
				}
				return err
			}
		}
		return nil
	}
	if err := loopback(ctx, send, receive); err != nil {
		return Sample{}, fmt.Errorf("loopback TCP: %w", err)
	}
	return newSample(received, elapsed), nil
}

// loopback connects a sender and a receiver over TCP on 127.0.0.1 and
// runs send on its own goroutine and receive on the caller's. The sender
// waits for one byte from the receiver before send starts, so receive
// can start its clock with nothing already buffered in the socket. It
// returns when both are done, with the error of the side that failed
// first; a failure closes the connection so the other side, blocked on
// it, ends too. ctx ending closes it as well.
func loopback(ctx context.Context, send func(io.Writer) error, receive func(io.Reader) error) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	type accepted struct {
		conn net.Conn
		err  error
	}
	acceptc := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		acceptc <- accepted{c, err}
	}()
	var dialer net.Dialer
	client, err := dialer.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		ln.Close() // ends the Accept
		if a := <-acceptc; a.conn != nil {
			a.conn.Close()
		}
		return err
	}
	defer client.Close()
	// A completed dial is in the listener's queue, so Accept returns now.
	a := <-acceptc
	if a.err != nil {
		return a.err
	}
	server := a.conn
	defer server.Close()

	var once sync.Once
	var first error
	fail := func(side string, err error) {
		once.Do(func() {
			first = fmt.Errorf("%s: %w", side, err)
			server.Close()
			client.Close()
		})
	}
	stop := context.AfterFunc(ctx, func() { fail("canceled", ctx.Err()) })
	defer stop()

	sent := make(chan struct{})
	go func() {
		defer close(sent)
		var b [1]byte
		if _, err := io.ReadFull(client, b[:]); err != nil {
			fail("sender waiting for start", err)
			return
		}
		if err := send(client); err != nil {
			fail("sender", err)
		}
	}()
	if _, err := server.Write([]byte{1}); err != nil {
		fail("receiver starting sender", err)
	} else if err := receive(server); err != nil {
		fail("receiver", err)
	}
	<-sent
	stop()
	// The ctx callback may still be inside once.Do; a second Do returns
	// only after it, so first is settled below.
	once.Do(func() {})
	if cerr := ctx.Err(); cerr != nil && first != nil {
		return cerr
	}
	return first
}
