package controlplane

import (
	"crypto/subtle"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/fjordmq/fjord/internal/metadata"
)

// Fjord's own Kafka clients (the HTTP gateway writing its idempotency
// index, a node forwarding a change to the active controller) identify
// themselves with a client id built from their node's id and incarnation
// id: "fjord-internal-<node id>-<incarnation, base64url>". Every node
// knows every registered broker's incarnation from the metadata image,
// and no Kafka API answers with it, so any node can tell such a client
// from an outside one, while an outside client cannot name a live
// incarnation. It is not a security boundary (it crosses the wire in
// plaintext like any client id; ACLs will be the boundary): it keeps
// clients, and tools run by mistake, off state they would break.

const internalClientPrefix = "fjord-internal-"

// InternalClientID is the client id of node's own clients in its
// incarnation inc.
func InternalClientID(node int32, inc metadata.UUID) string {
	return internalClientPrefix + strconv.Itoa(int(node)) + "-" + base64.RawURLEncoding.EncodeToString(inc[:])
}

// InternalClient reports whether clientID is the internal client id of a
// broker registered in img, and which.
func InternalClient(img *metadata.Image, clientID string) (node int32, ok bool) {
	rest, found := strings.CutPrefix(clientID, internalClientPrefix)
	if !found || img == nil {
		return -1, false
	}
	idText, _, found := strings.Cut(rest, "-")
	if !found {
		return -1, false
	}
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil || id < 0 {
		return -1, false
	}
	b, registered := img.Brokers[int32(id)]
	if !registered || b.IncarnationID == (metadata.UUID{}) {
		return -1, false
	}
	want := InternalClientID(int32(id), b.IncarnationID)
	if subtle.ConstantTimeCompare([]byte(clientID), []byte(want)) != 1 {
		return -1, false
	}
	return int32(id), true
}
