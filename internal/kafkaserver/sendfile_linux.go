package kafkaserver

import (
	"errors"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/fjordmq/fjord/internal/storage"
)

// canSendfile reports whether answers on nc can carry file ranges: a
// socket whose descriptor sendfile can write to.
func canSendfile(nc net.Conn) bool {
	_, ok := nc.(syscall.Conn)
	return ok
}

// errRangeShort: the file ended before the range did. Only a truncation
// can do that (a follower cutting its log under a fetch); the response
// cannot be finished, so the connection closes and the client retries.
var errRangeShort = errors.New("file range truncated while being sent")

// sendRange writes r's bytes to nc with sendfile, waiting on the
// runtime's poller when the socket is full, under nc's write deadline.
func sendRange(nc net.Conn, r storage.FileRange) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return fmt.Errorf("sendfile: %T has no descriptor", nc)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	src := int(r.File.Fd())
	off, remain := r.Pos, r.Size
	var sendErr error
	err = rc.Write(func(fd uintptr) bool {
		for remain > 0 {
			n, err := unix.Sendfile(int(fd), src, &off, remain)
			if n > 0 {
				remain -= n
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait until the socket takes more
			case err == unix.EINTR:
			case err != nil:
				sendErr = fmt.Errorf("sendfile: %w", err)
				return true
			case n == 0:
				sendErr = errRangeShort
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return sendErr
}
