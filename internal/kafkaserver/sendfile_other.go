//go:build !linux

package kafkaserver

import (
	"errors"
	"net"

	"github.com/fjordmq/fjord/internal/storage"
)

// canSendfile: fetch answers are copied here; sendfile is Linux's.
func canSendfile(net.Conn) bool { return false }

func sendRange(net.Conn, storage.FileRange) error {
	return errors.New("sendfile is not used on this system")
}
