package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"testing"
)

// principalCases pin DistinguishedName to Java's
// X500Principal.getName(). Every want was printed by OpenJDK 17 from
// the same certificate (see TestDistinguishedName).
var principalCases = []struct {
	name string
	rdns []testRDNSET // most significant first, as stored
	want string
}{
	{
		name: "kafka docs",
		rdns: []testRDNSET{{attr(oidC, asn1.TagPrintableString, "US")}, {utf8Attr(oidO, "Acme")}, {utf8Attr(oidOU, "eng")}, {utf8Attr(oidCN, "alice")}},
		want: "CN=alice,OU=eng,O=Acme,C=US",
	},
	{
		name: "issuer's order kept",
		rdns: []testRDNSET{{utf8Attr(oidCN, "alice")}, {utf8Attr(oidO, "Acme")}, {attr(oidC, asn1.TagPrintableString, "US")}},
		want: "C=US,O=Acme,CN=alice",
	},
	{
		name: "all named attributes",
		rdns: []testRDNSET{{attr(oidC, asn1.TagPrintableString, "US")}, {utf8Attr(oidST, "MD")}, {utf8Attr(oidL, "Fulton")}, {utf8Attr(oidStreet, "1 Main St")}, {utf8Attr(oidO, "mycp")}, {utf8Attr(oidOU, "SME")}, {utf8Attr(oidCN, "Duke")}},
		want: "CN=Duke,OU=SME,O=mycp,STREET=1 Main St,L=Fulton,ST=MD,C=US",
	},
	{
		name: "repeated attribute",
		rdns: []testRDNSET{{utf8Attr(oidO, "Acme")}, {utf8Attr(oidOU, "a")}, {utf8Attr(oidOU, "b")}, {utf8Attr(oidCN, "alice")}},
		want: "CN=alice,OU=b,OU=a,O=Acme",
	},
	{
		name: "DC and UID are named",
		rdns: []testRDNSET{{attr(oidDC, asn1.TagIA5String, "com")}, {attr(oidDC, asn1.TagIA5String, "example")}, {utf8Attr(oidUID, "alice")}},
		want: "UID=alice,DC=example,DC=com",
	},
	{
		name: "multi-valued RDN in DER order",
		rdns: []testRDNSET{{utf8Attr(oidO, "Acme")}, {utf8Attr(oidCN, "alice"), utf8Attr(oidOU, "eng")}},
		want: "OU=eng+CN=alice,O=Acme",
	},
	{
		name: "comma plus quotes",
		rdns: []testRDNSET{{utf8Attr(oidCN, `Smith, "Bob" + co`)}},
		want: `CN=Smith\, \"Bob\" \+ co`,
	},
	{
		name: "every escaped character",
		rdns: []testRDNSET{{utf8Attr(oidCN, `#a=b;c<d>e\f#`)}},
		want: `CN=\#a\=b\;c\<d\>e\\f\#`,
	},
	{
		name: "Kafka's comma with whitespace",
		rdns: []testRDNSET{{attr(oidDC, asn1.TagIA5String, "cz")}, {attr(oidDC, asn1.TagIA5String, "geodis")}, {utf8Attr(oidOU, "ITZ")}, {utf8Attr(oidCN, "Tkac, Adam")}},
		want: `CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`,
	},
	{
		name: "leading and trailing spaces",
		rdns: []testRDNSET{{utf8Attr(oidCN, "  two  words  ")}},
		want: `CN=\ \ two  words\ \ `,
	},
	{
		name: "only spaces",
		rdns: []testRDNSET{{utf8Attr(oidCN, "   ")}},
		want: `CN=\ \ \ `,
	},
	{
		name: "carriage return at the end, NUL inside",
		rdns: []testRDNSET{{utf8Attr(oidCN, "a\x00b\r")}},
		want: "CN=a\\00b\\\r",
	},
	{
		name: "not ASCII",
		rdns: []testRDNSET{{utf8Attr(oidO, "Zoë & 日本")}, {utf8Attr(oidCN, "zoë@example.com")}},
		want: "CN=zoë@example.com,O=Zoë & 日本",
	},
	{
		name: "unnamed types print as OID and DER",
		rdns: []testRDNSET{{attr(oidPostal, asn1.TagUTF8String, "21201")}, {attr(oidSerial, asn1.TagPrintableString, "42")}, {attr(oidTitle, asn1.TagUTF8String, "x")}, {attr(oidEmail, asn1.TagIA5String, "a@b.c")}, {utf8Attr(oidCN, "alice")}},
		want: "CN=alice,1.2.840.113549.1.9.1=#16056140622e63,2.5.4.12=#0c0178,2.5.4.5=#13023432,2.5.4.17=#0c053231323031",
	},
	{
		name: "NumericString is not text to Java",
		rdns: []testRDNSET{{attr(oidCN, asn1.TagNumericString, "123")}},
		want: "CN=#1203313233",
	},
	{
		name: "BMPString decoded as UTF-8, as Java does",
		rdns: []testRDNSET{{attr(oidCN, asn1.TagBMPString, "\x00a\x00b")}},
		want: `CN=\00a\00b`,
	},
	{
		name: "T61String Latin-1 byte",
		rdns: []testRDNSET{{attr(oidCN, asn1.TagT61String, "caf\xe9")}},
		want: "CN=caf\uFFFD",
	},
	{
		name: "empty subject",
		rdns: nil,
		want: "",
	},
}

func TestDistinguishedName(t *testing.T) {
	ca := newTestCA(t, "principal-ca")
	for _, tc := range principalCases {
		t.Run(tc.name, func(t *testing.T) {
			cert := certWithSubject(t, ca, subjectDER(t, tc.rdns...))
			if got := DistinguishedName(cert); got != tc.want {
				t.Errorf("DistinguishedName = %q, want %q (Go's pkix: %q)", got, tc.want, cert.Subject.String())
			}
			cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert, ca.cert}}}
			if got, ok := Principal(cs); !ok || got != "User:"+tc.want {
				t.Errorf("Principal = %q, %v; want %q", got, ok, "User:"+tc.want)
			}
		})
	}
}

func TestPrincipalNeedsVerifiedCertificate(t *testing.T) {
	ca := newTestCA(t, "principal-ca")
	cert := certWithSubject(t, ca, subjectDER(t, testRDNSET{utf8Attr(oidCN, "mallory")}))
	for name, cs := range map[string]tls.ConnectionState{
		"no certificate": {},
		// A certificate crypto/tls did not verify (a config with
		// RequestClientCert) names nobody.
		"unverified": {PeerCertificates: []*x509.Certificate{cert}},
	} {
		if got, ok := Principal(cs); ok || got != "" {
			t.Errorf("%s: Principal = %q, %v; want none", name, got, ok)
		}
		var m *PrincipalMapper
		if got, ok, err := m.Principal(cs); ok || got != "" || err != nil {
			t.Errorf("%s: PrincipalMapper.Principal = %q, %v, %v; want none", name, got, ok, err)
		}
	}
}

func TestPrincipalMapperPrincipal(t *testing.T) {
	ca := newTestCA(t, "principal-ca")
	cert := certWithSubject(t, ca, subjectDER(t, testRDNSET{utf8Attr(oidO, "Org")}, testRDNSET{utf8Attr(oidOU, "ServiceUsers")}, testRDNSET{utf8Attr(oidCN, "Duke")}))
	cs := tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}, VerifiedChains: [][]*x509.Certificate{{cert, ca.cert}}}
	m, err := ParseMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L`)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := m.Principal(cs); got != "User:duke" || !ok || err != nil {
		t.Errorf("Principal = %q, %v, %v; want User:duke", got, ok, err)
	}
	m, err = ParseMappingRules(`RULE:^CN=x$/y/`)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := m.Principal(cs); got != "" || !ok || err == nil {
		t.Errorf("Principal = %q, %v, %v; want no matching rule", got, ok, err)
	}
}

// TestPrincipalOverTLS checks the principal of a real mTLS handshake, for
// a subject made by IssueOptions.Subject.
func TestPrincipalOverTLS(t *testing.T) {
	ca := newTestCA(t, "ca")
	files, _ := serverFiles(t, ca)
	ts := loadTestStore(t, files)
	es := startEchoServer(t, ts.ServerConfig(ClientAuthRequired))
	certPEM, keyPEM := issue(t, ca, IssueOptions{
		CommonName: "alice",
		Subject:    pkix.Name{Country: []string{"US"}, Organization: []string{"Acme"}, OrganizationalUnit: []string{"eng"}},
		Client:     true,
	})
	mustDial(t, es, clientConfig(t, ca, certPEM, keyPEM))
	state := es.state(t)
	if got, ok := Principal(state); got != "User:CN=alice,OU=eng,O=Acme,C=US" || !ok {
		t.Errorf("Principal = %q, %v", got, ok)
	}
}

// FuzzDistinguishedName checks that formatRFC2253, which reads a
// certificate's raw subject, never panics on any bytes (crypto/x509
// validates subjects first, but the formatter must not depend on it).
func FuzzDistinguishedName(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x30, 0x00})
	f.Add([]byte{0x30, 0x02, 0x31, 0x00})
	for _, tc := range principalCases {
		der, err := asn1.Marshal(append([]testRDNSET{}, tc.rdns...))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(der)
		f.Add(append(der, 0x00)) // trailing garbage
		f.Add(der[:len(der)/2])  // truncated
	}
	f.Fuzz(func(t *testing.T, der []byte) {
		formatRFC2253(der)
	})
}
