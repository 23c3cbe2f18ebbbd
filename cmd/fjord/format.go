package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordFormat is a parsed --format template: literal text and verbs, in
// order, so each record costs appends only.
type recordFormat []formatPart

type formatPart struct {
	verb    byte // 0 for literal text
	literal string
}

const formatHelp = `%k key, %v value, %h headers (k=v,k2=v2; in keys and values a comma, '=', a backslash and any byte that is not printable UTF-8 print as \xHH), %o offset, %p partition, %t timestamp (ms since the epoch), %% a percent sign; \n newline, \t tab, \\ backslash`

// parseFormat parses a template such as "%p:%o %k=%v\n".
func parseFormat(s string) (recordFormat, error) {
	var (
		out recordFormat
		lit strings.Builder
	)
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, formatPart{literal: lit.String()})
			lit.Reset()
		}
	}
	bad := func(what string) error {
		return fmt.Errorf("--format %q: %s; allowed: %s", s, what, formatHelp)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '%':
			if i+1 == len(s) {
				return nil, bad("ends with a lone %")
			}
			i++
			switch v := s[i]; v {
			case 'k', 'v', 'h', 'o', 'p', 't':
				flush()
				out = append(out, formatPart{verb: v})
			case '%':
				lit.WriteByte('%')
			default:
				return nil, bad(fmt.Sprintf("unknown verb %%%c", v))
			}
		case '\\':
			if i+1 == len(s) {
				return nil, bad(`ends with a lone \`)
			}
			i++
			switch e := s[i]; e {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, bad(fmt.Sprintf(`unknown escape \%c`, e))
			}
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return out, nil
}

// appendRecord appends r formatted. A null key or value prints as
// nothing, as kcat does.
func (f recordFormat) appendRecord(b []byte, r *kgo.Record) []byte {
	for _, p := range f {
		switch p.verb {
		case 0:
			b = append(b, p.literal...)
		case 'k':
			b = append(b, r.Key...)
		case 'v':
			b = append(b, r.Value...)
		case 'h':
			b = appendHeaders(b, r.Headers)
		case 'o':
			b = strconv.AppendInt(b, r.Offset, 10)
		case 'p':
			b = strconv.AppendInt(b, int64(r.Partition), 10)
		case 't':
			b = strconv.AppendInt(b, r.Timestamp.UnixMilli(), 10)
		}
	}
	return b
}

// appendHeaders appends headers as k=v,k2=v2, in the record's order
// (Kafka allows a key more than once). In keys and values, the bytes that
// would make the list ambiguous (',', '=', '\\') and every byte that is not
// part of a printable UTF-8 character print as \xHH, so that the list
// splits at its commas and first '=' and stays on one line. Printable
// non-ASCII text (smørbrød) prints as it is.
func appendHeaders(b []byte, headers []kgo.RecordHeader) []byte {
	for i, h := range headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendEscaped(b, []byte(h.Key))
		b = append(b, '=')
		b = appendEscaped(b, h.Value)
	}
	return b
}

func appendEscaped(b, s []byte) []byte {
	const hex = "0123456789abcdef"
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if r == ',' || r == '=' || r == '\\' || r == utf8.RuneError || !unicode.IsPrint(r) {
			for _, c := range s[:n] {
				b = append(b, '\\', 'x', hex[c>>4], hex[c&0xf])
			}
		} else {
			b = append(b, s[:n]...)
		}
		s = s[n:]
	}
	return b
}
