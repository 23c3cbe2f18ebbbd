package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"strings"
	"unicode/utf8"
)

// Kafka's SSL principal, and why Fjord prints distinguished names itself.
//
// Kafka's DefaultKafkaPrincipalBuilder names a client that presented a
// certificate "User:" + mapper(X500Principal.getName()) of the leaf's
// subject, the mapper being ssl.principal.mapping.rules (mapping.go;
// default: the name unchanged). A TLS client without a certificate is
// User:ANONYMOUS in Kafka; Principal leaves that choice to the caller.
// getName() is Java's RFC 2253 format (sun.security.x509.AVA
// .toRFC2253String), and it is what operators write ACLs against, so
// DistinguishedName reproduces it. Go's pkix.Name.String() differs:
//
//   - Order. pkix.Name.String() rebuilds the name from its parsed fields
//     (SERIALNUMBER, CN, OU, O, POSTALCODE, STREET, L, ST, C, then other
//     attributes), whatever the certificate's order. Java prints the
//     certificate's RDNs last to first. DistinguishedName reads
//     RawSubject, so "CN=alice,OU=eng,O=Acme,C=US" comes out in the
//     order the issuer wrote.
//   - Multi-valued RDNs. Go prints each value of one as an RDN of its
//     own; Java joins them by "+", in the SET's (DER-sorted) order:
//     "OU=eng+CN=alice,O=Acme".
//   - Names of attributes. Java names only CN, C, L, ST, O, OU, STREET,
//     DC and UID in this format; every other type, SERIALNUMBER,
//     POSTALCODE and emailAddress included, is its dotted OID followed
//     by "=#" and the hex of the value's DER encoding (lower case):
//     "1.2.840.113549.1.9.1=#1611616c696365406578616d706c652e636f6d".
//     Go names SERIALNUMBER and POSTALCODE and hexes DC and UID.
//   - Escaping. Java puts a backslash before each of , = + < > # ; " \
//     wherever it occurs (Go: not "=", and "#" only first), writes NUL
//     as \00, and escapes every leading and trailing space and carriage
//     return (Go: the first and last character only).
//   - Value types. Java prints PrintableString, T61String, IA5String,
//     GeneralString, BMPString and UTF8String values as text and any
//     other type (NumericString, VisibleString, UniversalString...) as
//     "#" and hex, even under a named attribute. Java decodes the text's
//     bytes as UTF-8 whatever the type: a BMPString (UTF-16) "ab" is
//     "\00a\00b". DistinguishedName does the same, since the point is
//     Kafka's string, not the right one.
//
// Differences left (DistinguishedName's expectations in
// principal_test.go were printed by Java 17 from the same certificates):
//
//   - crypto/x509 refuses, and so crypto/tls fails the handshake of, a
//     certificate whose subject has a value type other than UTF8String,
//     PrintableString, T61String, IA5String, BMPString and NumericString
//     (GeneralString, VisibleString, UniversalString...), or a
//     PrintableString or IA5String with characters outside its set. Java
//     accepts them; Fjord cannot name such clients at all.
//   - Java refuses a certificate with an empty subject and no subject
//     alternative name; Go accepts it, and its principal is "User:".
//   - Bytes that are not UTF-8 (possible in T61String and BMPString
//     values only) become one U+FFFD each, where Java's decoder may use
//     one for a run.
//   - A subject crypto/x509 accepted but encoding/asn1 cannot split into
//     RDNs (not expected: both require DER) falls back to
//     pkix.Name.String().

// Principal returns Kafka's default principal, "User:" +
// DistinguishedName of the leaf, for the client of a server-side
// connection that presented a certificate the server verified. ok is
// false when there is none (client auth "none", or "requested" and the
// client sent none): a certificate crypto/tls did not verify never
// names a principal. For ssl.principal.mapping.rules, use
// PrincipalMapper.Principal.
func Principal(cs tls.ConnectionState) (string, bool) {
	leaf := verifiedLeaf(cs)
	if leaf == nil {
		return "", false
	}
	return "User:" + DistinguishedName(leaf), true
}

func verifiedLeaf(cs tls.ConnectionState) *x509.Certificate {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return cs.VerifiedChains[0][0]
}

// DistinguishedName returns cert's subject as Java's
// X500Principal.getName() prints it, which is the string Kafka's
// principal mapping rules see. See the comment at the top of this file
// for how that differs from pkix.Name.String().
func DistinguishedName(cert *x509.Certificate) string {
	dn, err := formatRFC2253(cert.RawSubject)
	if err != nil {
		return cert.Subject.String()
	}
	return dn
}

// rfc2253Keywords are the attribute types Java names in RFC 2253 format
// (AVAKeyword entries marked RFC 2253 compliant); the rest print as OIDs.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.9":                    "STREET",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// javaStringTags are the universal types Java prints as text
// (AVA.isDerString, non-canonical).
var javaStringTags = map[int]bool{
	asn1.TagUTF8String:      true,
	asn1.TagPrintableString: true,
	asn1.TagT61String:       true,
	asn1.TagIA5String:       true,
	asn1.TagGeneralString:   true,
	asn1.TagBMPString:       true,
}

type attributeTypeAndValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// formatRFC2253 prints a DER Name (SEQUENCE OF SET OF
// AttributeTypeAndValue) as Java's RFC 2253 getName: RDNs last to first,
// joined by ","; the values of one RDN in the SET's order, joined by "+".
func formatRFC2253(der []byte) (string, error) {
	var rdns []asn1.RawValue
	rest, err := asn1.Unmarshal(der, &rdns)
	if err != nil {
		return "", err
	}
	if len(rest) != 0 {
		return "", errors.New("tlsconf: data after the subject")
	}
	var b strings.Builder
	for i := len(rdns) - 1; i >= 0; i-- {
		rdn := rdns[i]
		if rdn.Class != asn1.ClassUniversal || rdn.Tag != asn1.TagSet || !rdn.IsCompound {
			return "", errors.New("tlsconf: an RDN is not a SET")
		}
		if i != len(rdns)-1 {
			b.WriteByte(',')
		}
		for first, set := true, rdn.Bytes; len(set) > 0; first = false {
			var atv attributeTypeAndValue
			if set, err = asn1.Unmarshal(set, &atv); err != nil {
				return "", err
			}
			if !first {
				b.WriteByte('+')
			}
			writeAttribute(&b, atv)
		}
	}
	return b.String(), nil
}

func writeAttribute(b *strings.Builder, atv attributeTypeAndValue) {
	oid := atv.Type.String()
	keyword, named := rfc2253Keywords[oid]
	v := atv.Value
	if !named || v.Class != asn1.ClassUniversal || v.IsCompound || !javaStringTags[v.Tag] {
		if !named {
			keyword = oid
		}
		b.WriteString(keyword)
		b.WriteString("=#")
		b.WriteString(hex.EncodeToString(v.FullBytes))
		return
	}
	b.WriteString(keyword)
	b.WriteByte('=')
	b.WriteString(escapeRFC2253(decodeUTF8(v.Bytes)))
}

// decodeUTF8 is Java's new String(bytes, UTF_8), but for invalid bytes,
// which become one U+FFFD each.
func decodeUTF8(p []byte) string {
	if utf8.Valid(p) {
		return string(p)
	}
	var b strings.Builder
	for len(p) > 0 {
		r, size := utf8.DecodeRune(p)
		b.WriteRune(r) // RuneError for an invalid byte
		p = p[size:]
	}
	return b.String()
}

// escapeRFC2253 escapes a value as Java's AVA.toRFC2253String: a
// backslash before each of , = + < > # ; " \, NUL as \00, then a
// backslash before each leading and trailing space or carriage return.
// Working on bytes is working on characters here: every byte it looks
// at is ASCII, and no byte of a multi-byte UTF-8 sequence is.
func escapeRFC2253(v string) string {
	var e []byte
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case ',', '=', '+', '<', '>', '#', ';', '"', '\\':
			e = append(e, '\\', c)
		case 0:
			e = append(e, '\\', '0', '0')
		default:
			e = append(e, c)
		}
	}
	isSpace := func(c byte) bool { return c == ' ' || c == '\r' }
	lead := 0
	for lead < len(e) && isSpace(e[lead]) {
		lead++
	}
	trail := len(e) - 1 // last byte that is not trailing space
	for trail >= 0 && isSpace(e[trail]) {
		trail--
	}
	if lead == 0 && trail == len(e)-1 {
		return string(e)
	}
	out := make([]byte, 0, len(e)+lead+len(e)-1-trail)
	for i, c := range e {
		if i < lead || i > trail {
			out = append(out, '\\')
		}
		out = append(out, c)
	}
	return string(out)
}
