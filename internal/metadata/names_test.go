package metadata

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestValidateTopicName(t *testing.T) {
	good := []string{"a", "orders", "Orders.v2", "a_b-c.d", "...", "__consumer_offsets", strings.Repeat("x", 249)}
	for _, n := range good {
		if err := ValidateTopicName(n); err != nil {
			t.Errorf("ValidateTopicName(%q) = %v", n, err)
		}
	}
	bad := map[string]string{
		"":                       "empty",
		".":                      `"."`,
		"..":                     `".."`,
		strings.Repeat("x", 250): "250 characters",
		"a b":                    `contains " "`,
		"a/b":                    `contains "/"`,
		"ä":                      `contains "\xc3"`,
		"a\x00":                  `contains "\x00"`,
	}
	for n, want := range bad {
		err := ValidateTopicName(n)
		if err == nil {
			t.Errorf("ValidateTopicName(%q) accepted", n)
			continue
		}
		if !errors.Is(err, kerr.InvalidTopicException) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateTopicName(%q) = %v; want INVALID_TOPIC_EXCEPTION containing %q", n, err, want)
		}
	}
}

func TestValidateRack(t *testing.T) {
	good := []string{"", "r1", "us-east-1a", "Rack 12", "zone/b", "ünïcödé", "机架", strings.Repeat("r", MaxRackLength)}
	for _, r := range good {
		if err := ValidateRack(r); err != nil {
			t.Errorf("ValidateRack(%q) = %v", r, err)
		}
	}
	bad := map[string]string{
		strings.Repeat("r", MaxRackLength+1): "256 bytes long (allowed: at most 255)",
		strings.Repeat("r", 1<<20):           "1048576 bytes long",
		// Two bytes of a three-byte character: cut text.
		"r\xe6\x9c": "not UTF-8",
		" r1":       "starts or ends with a space",
		"r1 ":       "starts or ends with a space",
		"r1\n":      "U+000A",
		"r\x00":     "U+0000",
		"r\x1b[31m": "U+001B",
		"r\x7f":     "U+007F",
		"r\u00a0":   "U+00A0", // no-break space: looks like a space, is not one
		"r\u200b1":  "U+200B", // zero-width space
		"r\u202e1":  "U+202E", // right-to-left override
		"r\t1":      "U+0009",
	}
	for r, want := range bad {
		err := ValidateRack(r)
		if err == nil {
			t.Errorf("ValidateRack(%q) accepted", r)
			continue
		}
		if !errors.Is(err, kerr.InvalidRequest) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateRack(%.40q) = %.200v; want INVALID_REQUEST containing %q", r, err, want)
		}
		if len(err.Error()) > 400 {
			t.Errorf("ValidateRack of %d bytes: the error is %d bytes; it must not echo the value", len(r), len(err.Error()))
		}
	}
}
