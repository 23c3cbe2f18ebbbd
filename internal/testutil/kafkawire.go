package testutil

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

// ServeKafka answers the Kafka-protocol requests of one connection in
// order, each with answer's response, until the connection closes or
// answer fails: the wire side of a fake broker or controller for tests
// of a client's requests (the codec is franz-go's kmsg).
func ServeKafka(nc net.Conn, answer func(kmsg.Request) (kmsg.Response, error)) error {
	br := bufio.NewReader(nc)
	for {
		var size [4]byte
		if _, err := io.ReadFull(br, size[:]); err != nil {
			return err
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(br, frame); err != nil {
			return err
		}
		r := kbin.Reader{Src: frame}
		key, version, corr := r.Int16(), r.Int16(), r.Int32()
		r.NullableString() // client id
		req := fjordmsg.RequestForKey(key)
		if req == nil {
			return fmt.Errorf("unknown API key %d", key)
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			for n := r.Uvarint(); n > 0; n-- { // header tags
				r.Uvarint()
				r.Span(int(r.Uvarint()))
			}
		}
		if err := r.Complete(); err != nil {
			return fmt.Errorf("%s v%d header: %v", fjordmsg.NameForKey(key), version, err)
		}
		if err := req.ReadFrom(r.Src); err != nil {
			return fmt.Errorf("%s v%d body: %v", fjordmsg.NameForKey(key), version, err)
		}
		resp, err := answer(req)
		if err != nil {
			return err
		}
		resp.SetVersion(version)
		out := binary.BigEndian.AppendUint32(nil, uint32(corr))
		if resp.IsFlexible() && key != 18 { // ApiVersions' header is always v0
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		if _, err := nc.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(out))), out...)); err != nil {
			return err
		}
	}
}
