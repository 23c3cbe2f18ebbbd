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
