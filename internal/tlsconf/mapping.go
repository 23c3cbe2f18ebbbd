package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Kafka's ssl.principal.mapping.rules (KIP-371; SslPrincipalMapper).
//
// Syntax, as Kafka splits and parses it:
//
//	rules = rule *("," rule)          whitespace around rules and commas is ignored
//	rule  = "DEFAULT"                  the name unchanged
//	      | "RULE:" pattern "/" replacement "/" ["L" | "U"]
//	      | ""                         empty: ignored (",," and a trailing "," are fine)
//
// pattern and replacement run to the next "/" not escaped by a
// backslash; they may hold commas and spaces, and keep their escapes
// (a "\/" is a "/" to the regular expression and to the replacement).
// Anything after the flag before the next comma makes the rule invalid,
// as does anything else that is not a rule ("default", "RULE:a/b" with
// one slash, "RULE:a/b/LU"). The whole string is trimmed first.
//
// Mapping: rules are tried in order. DEFAULT returns the name. A RULE
// applies when its pattern matches the whole name (Java's
// Matcher.matches()); the result is then Java's
// name.replaceAll(pattern, replacement), lower- or upper-cased for L or
// U. A replacement refers to groups as $n or ${name} and escapes with a
// backslash; a $n whose first digit is above the pattern's group count
// is the literal text "$n" (Kafka's escapeLiteralBackReferences), and of
// a multi-digit $nn the longest prefix that is a group is taken (Java).
// Java's replaceAll, unlike Go's, also replaces an empty match right
// after a non-empty one, so RULE:.*/X/ maps any name to "XX" in Kafka;
// it does here too (see mappingRule.matches). No rule applying is an
// error: Kafka fails the client's authentication then. An empty rules
// string has no rules, so every name fails, as in Kafka; Kafka's default
// for the setting is "DEFAULT" (DefaultMappingRules), and a
// configuration layer must default to that, not to "".
//
// mapping_test.go's expectations were produced by Java 17 running
// Kafka's splitting and parsing expressions and Rule.apply. Differences
// from Kafka, all outside what its documentation shows:
//
//   - Patterns are Go's RE2 syntax, not java.util.regex: lookaround,
//     backreferences in the pattern, possessive quantifiers and atomic
//     groups are refused by ParseMappingRules. Java's "." also excludes
//     \r and \u0085/\u2028/\u2029, and its "$" also matches before a
//     final line break; Go's do not. That shows only on names with line
//     breaks, which subjects almost never have.
//   - A replacement error Kafka raises only when the rule first applies
//     ("$x", "$" at the end, "$1" in a rule with no group, an unknown
//     ${name}) is refused by ParseMappingRules instead.
//   - Kafka's literal-reference escaping misplaces its backslash after
//     the first out-of-range $n of a replacement, and escapes an already
//     escaped "\$n", making such rules fail when they apply; here each
//     out-of-range $n is literal text and "\$" is always a literal "$".
//   - L and U use Go's Unicode case mapping, not Java's Locale.ENGLISH
//     one ("ß" upper-cases to "SS" in Java only; ASCII is the same).
//   - A line break inside a rule (not between rules) is refused; Kafka's
//     splitter skips text around it instead.

// DefaultMappingRules is Kafka's default ssl.principal.mapping.rules.
const DefaultMappingRules = "DEFAULT"

// PrincipalMapper applies ssl.principal.mapping.rules. A nil
// *PrincipalMapper is DEFAULT. Safe for concurrent use.
type PrincipalMapper struct {
	rules []mappingRule
}

type mappingRule struct {
	isDefault bool
	// pattern and replacement are as written, escapes included.
	pattern, replacement string
	lower, upper         bool
	re                   *regexp.Regexp // pattern, for replaceAll
	whole                *regexp.Regexp // \A(?:pattern)\z: Java's matches()
	// afterRune is \A(?s:.)(?:pattern): pattern's preferred match
	// starting right after the text's first rune, seen with that rune
	// as context (for ^, \b and (?m)^). See matches.
	afterRune *regexp.Regexp
	template  []replacementPart
}

// replacementPart is literal text (group < 0) or a group's text.
type replacementPart struct {
	literal string
	group   int
}

// ParseMappingRules parses ssl.principal.mapping.rules (syntax above).
func ParseMappingRules(rules string) (*PrincipalMapper, error) {
	s := javaTrim(rules)
	m := &PrincipalMapper{}
	for i := 0; ; {
		i = skipSpace(s, i)
		start := i
		var end int
		if strings.HasPrefix(s[i:], "DEFAULT") && atSeparator(s, i+len("DEFAULT")) {
			end = i + len("DEFAULT")
			m.rules = append(m.rules, mappingRule{isDefault: true})
		} else if pattern, replacement, flag, after, ok := scanRule(s, i); ok {
			var err error
			if end, err = scanToSeparator(s, after); err != nil {
				return nil, err
			}
			if end != after {
				return nil, fmt.Errorf("tlsconf: invalid principal mapping rule %q: unexpected %q after it", s[start:end], s[after:end])
			}
			rule, err := newMappingRule(pattern, replacement, flag)
			if err != nil {
				return nil, fmt.Errorf("tlsconf: principal mapping rule %q: %w", s[start:end], err)
			}
			m.rules = append(m.rules, rule)
		} else {
			var err error
			if end, err = scanToSeparator(s, i); err != nil {
				return nil, err
			}
			if end != start {
				return nil, fmt.Errorf("tlsconf: invalid principal mapping rule %q", s[start:end])
			}
			// An empty rule: ignored.
		}
		i = skipSpace(s, end)
		if i == len(s) {
			return m, nil
		}
		i++ // the comma: atSeparator held at end
	}
}

// scanRule reads "RULE:" pattern "/" replacement "/" [flag] at s[i:],
// returning where it ends, or ok false if s[i:] is not shaped so.
func scanRule(s string, i int) (pattern, replacement string, flag byte, end int, ok bool) {
	const prefix = "RULE:"
	if !strings.HasPrefix(s[i:], prefix) {
		return "", "", 0, 0, false
	}
	i += len(prefix)
	if pattern, i, ok = scanRulePart(s, i); !ok {
		return "", "", 0, 0, false
	}
	if replacement, i, ok = scanRulePart(s, i+1); !ok {
		return "", "", 0, 0, false
	}
	i++
	if i < len(s) && (s[i] == 'L' || s[i] == 'U') {
		flag = s[i]
		i++
	}
	return pattern, replacement, flag, i, true
}

// scanRulePart reads characters other than "/" and "\", and escapes
// ("\" and any character but a line break), up to a "/", returning the
// text and the index of the "/".
func scanRulePart(s string, i int) (string, int, bool) {
	start := i
	for i < len(s) {
		switch s[i] {
		case '/':
			return s[start:i], i, true
		case '\\':
			if i+1 == len(s) {
				return "", 0, false
			}
			r, size := utf8.DecodeRuneInString(s[i+1:])
			if isLineBreak(r) {
				return "", 0, false
			}
			i += 1 + size
		default:
			i++ // bytes of a multi-byte rune are never '/' or '\'
		}
	}
	return "", 0, false
}

// scanToSeparator returns the first index from i where only whitespace
// stands before a comma or the end (Kafka's lazy ".*?" before
// "\s*(,\s*|$)"), refusing to cross a line break, which "." does not
// match. Linear: a run of whitespace not followed by a separator is
// skipped whole, since no position inside it is one either.
func scanToSeparator(s string, i int) (int, error) {
	for {
		k := skipSpace(s, i)
		if k == len(s) || s[k] == ',' {
			return i, nil
		}
		r, size := utf8.DecodeRuneInString(s[k:])
		if strings.ContainsAny(s[i:k], "\n\r") || isLineBreak(r) {
			return 0, fmt.Errorf("tlsconf: principal mapping rules: a line break inside a rule near byte %d", i)
		}
		i = k + size
	}
}

func atSeparator(s string, i int) bool {
	i = skipSpace(s, i)
	return i == len(s) || s[i] == ','
}

// skipSpace skips Java regex's \s: [ \t\n\x0B\f\r].
func skipSpace(s string, i int) int {
	for i < len(s) && strings.IndexByte(" \t\n\x0b\f\r", s[i]) >= 0 {
		i++
	}
	return i
}

// isLineBreak is Java regex's line terminator, which "." does not match.
func isLineBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == '\u0085' || r == '\u2028' || r == '\u2029'
}

// javaTrim is String.trim: it removes bytes <= ' ' from both ends.
func javaTrim(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
}

func newMappingRule(pattern, replacement string, flag byte) (mappingRule, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return mappingRule{}, err
	}
	// pattern compiled alone, so it is balanced and the group cannot
	// change its meaning.
	whole, err := regexp.Compile(`\A(?:` + pattern + `)\z`)
	if err != nil {
		return mappingRule{}, err
	}
	afterRune, err := regexp.Compile(`\A(?s:.)(?:` + pattern + `)`)
	if err != nil {
		return mappingRule{}, err
	}
	template, err := parseReplacement(replacement, re)
	if err != nil {
		return mappingRule{}, err
	}
	return mappingRule{
		pattern: pattern, replacement: replacement,
		lower: flag == 'L', upper: flag == 'U',
		re: re, whole: whole, afterRune: afterRune, template: template,
	}, nil
}

// parseReplacement parses a replacement as Java's
// Matcher.appendReplacement reads it, after Kafka's
// escapeLiteralBackReferences (see the comment at the top of the file).
func parseReplacement(r string, re *regexp.Regexp) ([]replacementPart, error) {
	groups := re.NumSubexp()
	var parts []replacementPart
	var lit strings.Builder
	group := func(n int) {
		if lit.Len() > 0 {
			parts = append(parts, replacementPart{literal: lit.String(), group: -1})
			lit.Reset()
		}
		parts = append(parts, replacementPart{group: n})
	}
	for i := 0; i < len(r); {
		switch c := r[i]; {
		case c == '\\':
			if i+1 == len(r) {
				return nil, errors.New("replacement ends in an escape with no character")
			}
			_, size := utf8.DecodeRuneInString(r[i+1:])
			lit.WriteString(r[i+1 : i+1+size])
			i += 1 + size
		case c == '$' && i+1 < len(r) && r[i+1] == '{':
			j := i + 2
			for j < len(r) && isASCIIAlnum(r[j]) {
				j++
			}
			name := r[i+2 : j]
			switch {
			case j == len(r) || r[j] != '}':
				return nil, fmt.Errorf("replacement group name at byte %d has no closing '}'", i)
			case name == "" || isDigit(name[0]):
				return nil, fmt.Errorf("replacement group name %q is not a letter then letters or digits", name)
			case re.SubexpIndex(name) < 0:
				return nil, fmt.Errorf("replacement refers to a group %q the pattern does not have", name)
			}
			group(re.SubexpIndex(name))
			i = j + 1
		case c == '$' && i+1 < len(r) && isDigit(r[i+1]):
			n := int(r[i+1] - '0')
			if n > groups {
				if groups == 0 {
					// Kafka escapes nothing in a rule without groups,
					// and Java fails the reference.
					return nil, fmt.Errorf("replacement refers to group %d of a pattern without groups", n)
				}
				lit.WriteByte('$') // the digits follow as text
				i++
				continue
			}
			j := i + 2
			for j < len(r) && isDigit(r[j]) && n*10+int(r[j]-'0') <= groups {
				n = n*10 + int(r[j]-'0')
				j++
			}
			group(n)
			i = j
		case c == '$':
			return nil, fmt.Errorf("replacement has a '$' at byte %d that is not a group reference (escape it as \\$)", i)
		default:
			lit.WriteByte(c)
			i++
		}
	}
	if lit.Len() > 0 {
		parts = append(parts, replacementPart{literal: lit.String(), group: -1})
	}
	return parts, nil
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isASCIIAlnum(c byte) bool { return isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// Map returns the name the rules give the distinguished name dn (as
// DistinguishedName prints it), or an error wrapping ErrNoMatchingRule.
func (m *PrincipalMapper) Map(dn string) (string, error) {
	if m == nil {
		return dn, nil
	}
	for i := range m.rules {
		if name, ok := m.rules[i].apply(dn); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w %q (rules %s)", ErrNoMatchingRule, dn, m)
}

// Principal is Principal with the rules applied: "User:" + the mapped
// name of the verified client certificate's subject. ok is false when
// the client presented none (see Principal); err is Map's.
func (m *PrincipalMapper) Principal(cs tls.ConnectionState) (principal string, ok bool, err error) {
	leaf := verifiedLeaf(cs)
	if leaf == nil {
		return "", false, nil
	}
	name, err := m.Map(DistinguishedName(leaf))
	if err != nil {
		return "", true, err
	}
	return "User:" + name, true, nil
}

func (r *mappingRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	if !r.whole.MatchString(dn) {
		return "", false
	}
	var b strings.Builder
	last := 0
	for _, match := range r.matches(dn) {
		b.WriteString(dn[last:match[0]])
		for _, p := range r.template {
			if p.group < 0 {
				b.WriteString(p.literal)
			} else if start := match[2*p.group]; start >= 0 {
				b.WriteString(dn[start:match[2*p.group+1]])
			}
		}
		last = match[1]
	}
	b.WriteString(dn[last:])
	switch {
	case r.lower:
		return strings.ToLower(b.String()), true
	case r.upper:
		return strings.ToUpper(b.String()), true
	}
	return b.String(), true
}

// matches returns the matches Java's Matcher.find() loop (replaceAll)
// visits in dn, as FindAllStringSubmatchIndex does. The two loops differ
// in one case: after a non-empty match ending at b, Java accepts an empty
// match at b and Go skips it. Both then search on from b's next
// character, so the lists differ only by those empty matches, which this
// adds back: where a non-empty match ends at b and Go's next match does
// not start at b, any match starting at b is an empty one Go skipped.
// Whether one does is afterRune's match on dn from the rune before b
// (b > 0, since a non-empty match ends there), which gives the pattern
// the context Go's own search would have.
func (r *mappingRule) matches(dn string) [][]int {
	found := r.re.FindAllStringSubmatchIndex(dn, -1)
	var all [][]int
	for i, match := range found {
		all = append(all, match)
		b := match[1]
		if b == match[0] || i+1 < len(found) && found[i+1][0] == b {
			continue
		}
		_, width := utf8.DecodeLastRuneInString(dn[:b])
		probe := r.afterRune.FindStringSubmatchIndex(dn[b-width:])
		if probe == nil || probe[1] != width {
			continue // no match at b, or a non-empty one Go would have found
		}
		// Group 0 of probe spans the context rune too; the match is b..b.
		empty := []int{b, b}
		for _, index := range probe[2:] {
			if index >= 0 {
				index += b - width
			}
			empty = append(empty, index)
		}
		all = append(all, empty)
	}
	return all
}

// String returns the rules in a form ParseMappingRules reads back to the
// same rules: "RULE:pattern/replacement/[LU]" or "DEFAULT", joined by
// ",". (Kafka's toString drops the last "/" of a rule without a flag,
// which does not parse.)
func (m *PrincipalMapper) String() string {
	if m == nil {
		return DefaultMappingRules
	}
	var b strings.Builder
	for i, r := range m.rules {
		if i > 0 {
			b.WriteByte(',')
		}
		if r.isDefault {
			b.WriteString("DEFAULT")
			continue
		}
		b.WriteString("RULE:" + r.pattern + "/" + r.replacement + "/")
		switch {
		case r.lower:
			b.WriteByte('L')
		case r.upper:
			b.WriteByte('U')
		}
	}
	return b.String()
}
