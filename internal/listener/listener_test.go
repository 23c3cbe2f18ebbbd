package listener

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	ls, inter, err := Parse(Flags{
		Listeners:   "plaintext://127.0.0.1:9092, CLIENT://0.0.0.0:9094,SSL://127.0.0.1:0",
		Advertised:  "CLIENT://broker1.example.com:9094",
		ProtocolMap: "PLAINTEXT:PLAINTEXT,CLIENT:sasl_ssl,SSL:SSL",
		InterBroker: "ssl",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{Name: "PLAINTEXT", Bind: "127.0.0.1:9092", Protocol: Plaintext},
		{Name: "CLIENT", Bind: "0.0.0.0:9094", Advertised: "broker1.example.com:9094", Protocol: SASLSSL},
		{Name: "SSL", Bind: "127.0.0.1:0", Protocol: SSL},
	}
	if len(ls) != len(want) {
		t.Fatalf("got %+v, want %+v", ls, want)
	}
	for i := range want {
		if ls[i] != want[i] {
			t.Errorf("listener %d: got %+v, want %+v", i, ls[i], want[i])
		}
	}
	if inter != "SSL" {
		t.Errorf("inter-broker listener %q, want SSL", inter)
	}
	if l, ok := Find(ls, "client"); !ok || l.Protocol != SASLSSL {
		t.Errorf("Find(client) = %+v, %v", l, ok)
	}
}

func TestParseDefaults(t *testing.T) {
	ls, inter, err := Parse(Flags{Listeners: "SASL_SSL://[::1]:9093,PLAINTEXT://127.0.0.1:9092"})
	if err != nil {
		t.Fatal(err)
	}
	if inter != "SASL_SSL" {
		t.Errorf("inter-broker listener %q: the first listener is the default", inter)
	}
	if ls[0].Protocol != SASLSSL || !ls[0].Protocol.TLS() || !ls[0].Protocol.SASL() {
		t.Errorf("SASL_SSL maps to itself by default: %+v", ls[0])
	}
	if ls[1].Protocol != Plaintext || ls[1].Protocol.TLS() || ls[1].Protocol.SASL() {
		t.Errorf("PLAINTEXT maps to itself by default: %+v", ls[1])
	}
}

// Each bad setting is refused with an error that names what to change.
func TestParseRefuses(t *testing.T) {
	long := strings.Repeat("A", 65)
	var many []string
	for i := range 17 {
		many = append(many, fmt.Sprintf("L%d://127.0.0.1:0", i))
	}
	for _, tc := range []struct {
		name string
		f    Flags
		want string
	}{
		{"empty", Flags{}, "listeners is empty"},
		{"no scheme", Flags{Listeners: "127.0.0.1:9092"}, "want NAME://host:port"},
		{"bad port", Flags{Listeners: "PLAINTEXT://127.0.0.1:99999"}, "port 0..65535"},
		{"no port", Flags{Listeners: "PLAINTEXT://127.0.0.1"}, "port 0..65535"},
		{"bad name", Flags{Listeners: "PLAIN-TEXT://127.0.0.1:1"}, "letters, digits or underscores"},
		{"long name", Flags{Listeners: long + "://127.0.0.1:1", ProtocolMap: "A:SSL"}, "letters, digits or underscores"},
		{"duplicate name", Flags{Listeners: "SSL://127.0.0.1:1,ssl://127.0.0.1:2"}, "names SSL twice"},
		{"duplicate port", Flags{Listeners: "SSL://127.0.0.1:1,PLAINTEXT://127.0.0.1:1"}, "both bind port 1"},
		{"too many", Flags{Listeners: strings.Join(many, ",")}, "more than 16"},
		{"unmapped name", Flags{Listeners: "CLIENT://127.0.0.1:1"}, "listener CLIENT has no security protocol"},
		{"map replaces default", Flags{Listeners: "SSL://127.0.0.1:1", ProtocolMap: "CLIENT:SSL"}, "listener SSL has no security protocol"},
		{"unknown protocol", Flags{Listeners: "A://127.0.0.1:1", ProtocolMap: "A:KERBEROS"}, "unknown security protocol"},
		{"map without colon", Flags{Listeners: "A://127.0.0.1:1", ProtocolMap: "A"}, "want NAME:PROTOCOL"},
		{"map duplicate", Flags{Listeners: "A://127.0.0.1:1", ProtocolMap: "A:SSL,a:SSL"}, "names A twice"},
		{"advertised unknown", Flags{Listeners: "SSL://127.0.0.1:1", Advertised: "PLAINTEXT://h:1"}, "not one of the listeners"},
		{"advertised any-address", Flags{Listeners: "SSL://127.0.0.1:1", Advertised: "SSL://0.0.0.0:1"}, "host clients can dial"},
		{"advertised port 0", Flags{Listeners: "SSL://127.0.0.1:1", Advertised: "SSL://h:0"}, "port 1..65535"},
		{"every interface unadvertised", Flags{Listeners: "SSL://:9093"}, "give it an advertised listener"},
		{"inter-broker unknown", Flags{Listeners: "SSL://127.0.0.1:1", InterBroker: "PLAINTEXT"}, "not one of the listeners"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse(tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse(%+v) = %v, want an error containing %q", tc.f, err, tc.want)
			}
			if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnknownProtocol) {
				t.Errorf("error %v wraps neither sentinel", err)
			}
		})
	}
}

func TestParseSecurityProtocol(t *testing.T) {
	for _, p := range []SecurityProtocol{Plaintext, SSL, SASLPlaintext, SASLSSL} {
		got, err := ParseSecurityProtocol(strings.ToLower(p.String()))
		if err != nil || got != p {
			t.Errorf("ParseSecurityProtocol(%q) = %v, %v", p.String(), got, err)
		}
	}
	if _, err := ParseSecurityProtocol(""); !errors.Is(err, ErrUnknownProtocol) {
		t.Errorf("empty protocol: %v", err)
	}
	if s := SecurityProtocol(9).String(); s != "SecurityProtocol(9)" {
		t.Errorf("String of an unknown protocol: %q", s)
	}
}

// FuzzParse: Parse never panics, and what it accepts has a protocol for
// every listener and an inter-broker listener among them.
func FuzzParse(f *testing.F) {
	f.Add("PLAINTEXT://127.0.0.1:9092", "", "", "")
	f.Add("A://:1,B://[::1]:2", "A://h:1", "A:SSL,B:SASL_SSL", "b")
	f.Add("://", "://", ":", "")
	f.Fuzz(func(t *testing.T, listeners, advertised, protocolMap, inter string) {
		ls, name, err := Parse(Flags{Listeners: listeners, Advertised: advertised, ProtocolMap: protocolMap, InterBroker: inter})
		if err != nil {
			return
		}
		if _, ok := Find(ls, name); !ok {
			t.Fatalf("inter-broker listener %q is not among %+v", name, ls)
		}
		for _, l := range ls {
			if _, ok := protocolNames[l.Protocol]; !ok {
				t.Fatalf("listener %+v has no known protocol", l)
			}
		}
	})
}
