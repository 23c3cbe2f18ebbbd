package metadata

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// MaxTopicNameLength is Kafka's limit: a partition's directory name is
// "<topic>-<partition>" and must fit a 255-byte file name.
const MaxTopicNameLength = 249

// ValidateTopicName applies Kafka's rule: 1 to 249 characters from
// [a-zA-Z0-9._-], and not "." or "..". The error wraps ErrInvalidTopicName.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: topic name is empty", ErrInvalidTopicName)
	case name == "." || name == "..":
		return fmt.Errorf("%w: topic name %q is not allowed", ErrInvalidTopicName, name)
	case len(name) > MaxTopicNameLength:
		return fmt.Errorf("%w: topic name is %d characters long (allowed: at most %d)", ErrInvalidTopicName, len(name), MaxTopicNameLength)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: topic name %q contains %q (allowed: ASCII letters, digits, '.', '_', '-')", ErrInvalidTopicName, name, name[i:i+1])
		}
	}
	return nil
}

// MaxRackLength bounds a broker's rack (broker.rack), in bytes. Kafka sets
// no limit, but a rack is a zone or a rack name ("us-east-1a", "r12"), it
// goes out in every Metadata response for every broker and placement
// compares it, so a value of kilobytes is a mistake (a file's content, a
// pasted log line), not a rack.
const MaxRackLength = 255

// ValidateRack checks a broker's rack: empty (no rack), or at most
// MaxRackLength bytes of UTF-8 whose every character is printable
// (unicode.IsPrint: no control, format or zero-width characters, no space
// but U+0020), not starting or ending with a space. A rack is compared
// byte for byte, so invisible characters or a stray space would make two
// brokers in the same rack look apart. The error wraps ErrInvalidRack.
func ValidateRack(rack string) error {
	switch {
	case rack == "":
		return nil
	case len(rack) > MaxRackLength:
		return fmt.Errorf("%w: rack is %d bytes long (allowed: at most %d)", ErrInvalidRack, len(rack), MaxRackLength)
	case !utf8.ValidString(rack):
		return fmt.Errorf("%w: rack %q is not UTF-8", ErrInvalidRack, rack)
	case rack[0] == ' ' || rack[len(rack)-1] == ' ':
		return fmt.Errorf("%w: rack %q starts or ends with a space", ErrInvalidRack, rack)
	}
	for _, r := range rack {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("%w: rack %q contains %U (allowed: printable characters, no control or invisible ones)", ErrInvalidRack, rack, r)
		}
	}
	return nil
}
