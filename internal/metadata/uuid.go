package metadata

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
)

// IsZero reports whether u is the zero UUID, which Kafka reserves for "no
// topic id" and which is never a topic's id.
func (u UUID) IsZero() bool { return u == UUID{} }

// String prints u as hex with dashes (8-4-4-4-12).
func (u UUID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], u[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], u[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], u[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], u[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], u[10:16])
	return string(b[:])
}

// Base64 prints u as Kafka's tools do: base64url without padding.
func (u UUID) Base64() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// ParseUUID parses the form String prints.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("%w: uuid %q: want 8-4-4-4-12 hex digits", ErrDecode, s)
	}
	spans := [][2]int{{0, 8}, {9, 13}, {14, 18}, {19, 23}, {24, 36}}
	at := 0
	for _, sp := range spans {
		n, err := hex.Decode(u[at:], []byte(s[sp[0]:sp[1]]))
		if err != nil {
			return UUID{}, fmt.Errorf("%w: uuid %q: %v", ErrDecode, s, err)
		}
		at += n
	}
	return u, nil
}

// MarshalText makes a UUID a JSON string (String's form) in records and
// snapshots, readable in a dump of the metadata log.
func (u UUID) MarshalText() ([]byte, error) { return []byte(u.String()), nil }

func (u *UUID) UnmarshalText(b []byte) error {
	v, err := ParseUUID(string(b))
	if err != nil {
		return err
	}
	*u = v
	return nil
}
