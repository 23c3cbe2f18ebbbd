package controlplane

import (
	"context"
	"encoding/binary"
)

// Forwarding: a node that is not the active controller sends a change to
// the node that is, as the same Kafka request a client would send
// (package forward). Two rules keep that safe:
//
//   - A forwarded request is served locally or refused with
//     NOT_CONTROLLER, never forwarded again (LocalOnly), so two nodes
//     that disagree for a moment about who leads cannot pass a request
//     back and forth.
//   - The answer to a forwarded change carries the metadata offset of an
//     image that includes it, in a tagged field of the response
//     (MetadataOffsetTag), so the forwarding node answers its client only
//     once its own image has reached that offset: a CreateTopics through
//     any node is followed by a Produce to that node that succeeds.
//     Tagged fields (KIP-482) are skipped by every client that does not
//     know them, and the tag is only ever sent to another Fjord node.

// LocalOnly marks ctx so that a forwarding Client serves the change only
// if this node is the active controller, answering NOT_CONTROLLER
// otherwise.
func LocalOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, localOnlyKey{}, true)
}

// IsLocalOnly reports whether ctx was marked by LocalOnly.
func IsLocalOnly(ctx context.Context) bool {
	v, _ := ctx.Value(localOnlyKey{}).(bool)
	return v
}

type localOnlyKey struct{}

// MetadataOffsetTag is the tagged field, in the top level of a control
// change's response to another Fjord node, that holds the metadata
// offset (8 bytes, big endian) of an image that includes the change. It
// is far above the tags Kafka's schemas use (0 to a few).
const MetadataOffsetTag uint32 = 0x464a // "FJ"

// EncodeMetadataOffset is MetadataOffsetTag's value for offset.
func EncodeMetadataOffset(offset uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, offset)
}

// DecodeMetadataOffset reads MetadataOffsetTag's value; ok is false
// unless it is exactly 8 bytes.
func DecodeMetadataOffset(b []byte) (offset uint64, ok bool) {
	if len(b) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(b), true
}
