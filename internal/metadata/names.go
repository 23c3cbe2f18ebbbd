package metadata

import "fmt"

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
