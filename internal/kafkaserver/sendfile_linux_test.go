package kafkaserver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/fjordmq/fjord/internal/storage"
)

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := l.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// A range larger than the socket's buffers is sent whole: sendfile
// fills the socket, waits on the poller until the reader drains it, and
// goes on from where it stopped.
func TestSendRangeLargerThanTheSocket(t *testing.T) {
	server, client := tcpPair(t)
	data := make([]byte, 24<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "segment.log")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const pos = 1000
	sent := make(chan error, 1)
	go func() { sent <- sendRange(server, storage.FileRange{File: f, Pos: pos, Size: len(data) - pos - 10}) }()
	got := make([]byte, len(data)-pos-10)
	if _, err := io.ReadFull(client, got); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data[pos:len(data)-10]) {
		t.Fatal("the bytes received are not the range's")
	}
}

// A file shorter than its range (a truncation under the fetch) is an
// error, after the bytes that exist: the response cannot be finished.
func TestSendRangeOfATruncatedFile(t *testing.T) {
	server, client := tcpPair(t)
	path := filepath.Join(t.TempDir(), "segment.log")
	if err := os.WriteFile(path, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := sendRange(server, storage.FileRange{File: f, Pos: 6, Size: 10}); !errors.Is(err, errRangeShort) {
		t.Fatalf("sendRange: %v, want errRangeShort", err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(client, got); err != nil || string(got) != "6789" {
		t.Fatalf("received %q (%v), want the 4 bytes that exist", got, err)
	}
}
