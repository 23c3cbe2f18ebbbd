// Package topicconfig is the shape of a topic config's definition and the
// small validators the definitions share. It imports nothing of Fjord's,
// so every layer can use it.
//
// Each setting is defined once, next to the code that acts on it:
// storage's log settings in storage (storage.TopicConfigs), replica's
// min.insync.replicas in replica, and the Kafka configs Fjord accepts
// without acting on them (or refuses) where the edge decides them. The
// node, which imports them all, puts them in one Table (New); the
// controller's validation, the image's defaults, DescribeConfigs and the
// replica manager's overrides then read that one table, so a new setting
// is added in one place and cannot drift between readers.
package topicconfig

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Def describes one topic config. Names and defaults are Kafka's
// (flush.policy is Fjord's own).
type Def struct {
	Name    string
	Default string
	// Type is Kafka's config type name: "boolean", "string", "int",
	// "long", "double" or "list".
	Type string
	Doc  string
	// Inert: accepted, stored and described so Kafka tooling that sets it
	// (Terraform and Strimzi specs, configs copied between clusters) works,
	// but Fjord does not act on it yet; Doc says so.
	Inert bool
	// Validate says why a value is refused ("not allowed (allowed: a,
	// b)"), or nil. The caller names the config and the value. Values are
	// taken exactly as given (no trimming), so what is stored is what the
	// owner parses.
	Validate func(value string) error
	// DefaultFor, when set, is the default of a topic with
	// replicationFactor replicas per partition, for a setting whose safe
	// value depends on it (min.insync.replicas); Default is then the
	// value when the replication factor is not known. It must return a
	// value Validate accepts, for any factor from 0 up.
	DefaultFor func(replicationFactor int) string
}

// Table is a set of definitions, sorted by name (the order DescribeConfigs
// lists them in). A Table is immutable once built: read it from any
// goroutine.
type Table struct {
	defs   []Def
	byName map[string]int
}

// New returns the table of every def in parts, sorted by name. It panics
// on a name defined twice or a def without a type, doc or validator: the
// parts are fixed lists in the code, so that is a programming error.
func New(parts ...[]Def) *Table {
	t := &Table{byName: map[string]int{}}
	for _, p := range parts {
		t.defs = append(t.defs, p...)
	}
	slices.SortFunc(t.defs, func(a, b Def) int { return strings.Compare(a.Name, b.Name) })
	for i, d := range t.defs {
		if _, dup := t.byName[d.Name]; dup {
			panic(fmt.Sprintf("topicconfig: %s defined twice", d.Name))
		}
		if d.Name == "" || d.Type == "" || d.Doc == "" || d.Validate == nil {
			panic(fmt.Sprintf("topicconfig: %q lacks a name, type, doc or validator", d.Name))
		}
		t.byName[d.Name] = i
	}
	return t
}

// Defs returns every definition, sorted by name. The slice is the table's:
// read it, never modify it.
func (t *Table) Defs() []Def { return t.defs }

// Lookup returns the definition of a topic config.
func (t *Table) Lookup(name string) (Def, bool) {
	i, ok := t.byName[name]
	if !ok {
		return Def{}, false
	}
	return t.defs[i], true
}

// Check checks one value of a topic config. The error names the config,
// the value and what is allowed ("retention.ms=\"soon\": not an integer
// in range (allowed: -1 to ...)"), or says the name is unknown; callers
// wrap it in their own sentinel.
func (t *Table) Check(name, value string) error {
	d, ok := t.Lookup(name)
	if !ok {
		return fmt.Errorf("unknown topic config %q", name)
	}
	if err := d.Validate(value); err != nil {
		return fmt.Errorf("%s=%q: %v", name, value, err)
	}
	return nil
}

// SplitList splits a list config's value as Kafka does ("a,b" -> [a b],
// "" -> none).
func SplitList(value string) []string {
	if value == "" {
		return nil
	}
	return strings.Split(value, ",")
}

// AnyValue accepts every value.
func AnyValue(string) error { return nil }

// OneOf accepts exactly the values listed.
func OneOf(allowed ...string) func(string) error {
	return func(v string) error {
		if slices.Contains(allowed, v) {
			return nil
		}
		return fmt.Errorf("not allowed (allowed: %s)", strings.Join(allowed, ", "))
	}
}

// Only accepts one value, and says why the others are not supported.
func Only(value, why string) func(string) error {
	return func(v string) error {
		if v == value {
			return nil
		}
		return fmt.Errorf("not supported: %s (allowed: %s)", why, value)
	}
}

// IntAtLeast accepts a 32-bit integer (Kafka's "int") of at least lo.
func IntAtLeast(lo int64) func(string) error { return integerAtLeast(lo, 32) }

// LongAtLeast accepts a 64-bit integer (Kafka's "long") of at least lo.
func LongAtLeast(lo int64) func(string) error { return integerAtLeast(lo, 64) }

func integerAtLeast(lo int64, bits int) func(string) error {
	hi := int64(math.MaxInt64)
	if bits == 32 {
		hi = math.MaxInt32
	}
	return func(v string) error {
		n, err := strconv.ParseInt(v, 10, bits)
		if err != nil || n < lo {
			return fmt.Errorf("not an integer in range (allowed: %d to %d)", lo, hi)
		}
		return nil
	}
}

// Ratio accepts a number from 0 to 1.
func Ratio(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || !(f >= 0 && f <= 1) {
		return fmt.Errorf("not a number in range (allowed: 0 to 1)")
	}
	return nil
}

// PolicyList accepts a list of distinct policies, each one of allowed; the list
// may not be empty. allowedText is what the error says is allowed
// (cleanup.policy: "delete, compact, compact,delete").
func PolicyList(allowedText string, allowed ...string) func(string) error {
	return func(v string) error {
		items := SplitList(v)
		if len(items) == 0 {
			return fmt.Errorf("empty (allowed: %s)", allowedText)
		}
		seen := map[string]bool{}
		for _, it := range items {
			if !slices.Contains(allowed, it) {
				return fmt.Errorf("unknown policy %q (allowed: %s)", it, allowedText)
			}
			if seen[it] {
				return fmt.Errorf("policy %q listed twice (allowed: %s)", it, allowedText)
			}
			seen[it] = true
		}
		return nil
	}
}
