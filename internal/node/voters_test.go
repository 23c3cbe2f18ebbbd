package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

func TestParseVoters(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []Voter
	}{
		{"1@127.0.0.1:9093", []Voter{{1, "127.0.0.1:9093"}}},
		{"1@controller1:9093,2@controller2:9093,3@controller3:9093",
			[]Voter{{1, "controller1:9093"}, {2, "controller2:9093"}, {3, "controller3:9093"}}},
		// Order is kept; ids need not be dense or start at 1.
		{"7@h7:1,0@h0:65535,2147483647@h-max.example.com:2",
			[]Voter{{7, "h7:1"}, {0, "h0:65535"}, {2147483647, "h-max.example.com:2"}}},
		{"1@[::1]:9093,2@[2001:db8::2]:9093,3@10.0.0.3:9093",
			[]Voter{{1, "[::1]:9093"}, {2, "[2001:db8::2]:9093"}, {3, "10.0.0.3:9093"}}},
		// The same host on other ports is three voters (one machine, three
		// processes).
		{"1@localhost:1,2@localhost:2,3@localhost:3",
			[]Voter{{1, "localhost:1"}, {2, "localhost:2"}, {3, "localhost:3"}}},
		{"1@my_host.internal:9093", []Voter{{1, "my_host.internal:9093"}}},
	} {
		got, err := ParseVoters(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseVoters(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			continue
		}
		if s := FormatVoters(got); s != tc.in {
			t.Errorf("FormatVoters(ParseVoters(%q)) = %q", tc.in, s)
		}
	}
}

func TestParseVotersRefuses(t *testing.T) {
	many := func(n int) string {
		var e []string
		for i := range n {
			e = append(e, fmt.Sprintf("%d@h%d:9093", i, i))
		}
		return strings.Join(e, ",")
	}
	if _, err := ParseVoters(many(MaxVoters)); err != nil {
		t.Fatalf("%d voters refused: %v", MaxVoters, err)
	}
	longHost := strings.Repeat("h", maxHostLength+1)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty: allowed: id@host:port entries separated by commas"},
		{"only a comma", ",", "entry 1 of 2 is empty"},
		{"empty entry", "1@a:1,,2@b:2", "entry 2 of 3 is empty: allowed: id@host:port entries separated by single commas"},
		{"trailing comma", "1@a:1,2@b:2,", "entry 3 of 3 is empty"},
		{"leading comma", ",1@a:1", "entry 1 of 2 is empty"},
		{"space after comma", "1@a:1, 2@b:2", `entry " 2@b:2" contains white space`},
		{"space inside", "1 @a:1", `entry "1 @a:1" contains white space`},
		{"trailing newline", "1@a:1\n", `entry "1@a:1\n" contains white space`},
		{"tab", "1@a:1\t", "contains white space"},
		{"no-break space", "1@a:1\u00a0", "contains white space"},
		{"missing @", "1-a:1", `entry "1-a:1": want id@host:port`},
		{"address only", "a:1", `entry "a:1": want id@host:port`},
		{"two @", "1@a@b:1", `entry "1@a@b:1": want id@host:port`},
		{"id not a number", "one@a:1", `entry "one@a:1": id "one" is not a node id (allowed: 0 to 2147483647)`},
		{"negative id", "-1@a:1", `id "-1" is not a node id`},
		{"plus sign", "+1@a:1", `id "+1" is not a node id`},
		{"hex id", "0x1@a:1", `id "0x1" is not a node id`},
		{"empty id", "@a:1", `id "" is not a node id`},
		{"id too big", "2147483648@a:1", `id "2147483648" is not a node id`},
		{"missing port", "1@a", `entry "1@a": want host:port after the @`},
		{"missing host and port", "1@", "want host:port after the @"},
		{"missing host", "1@:9093", `entry "1@:9093": the host is empty`},
		{"unbracketed IPv6", "1@::1:9093", "want host:port after the @"},
		{"empty port", "1@a:", `port "": allowed: 1 to 65535`},
		{"port 0", "1@a:0", `entry "1@a:0": port "0": allowed: 1 to 65535`},
		{"port too big", "1@a:65536", `port "65536": allowed: 1 to 65535`},
		{"negative port", "1@a:-1", `port "-1": allowed: 1 to 65535`},
		{"named port", "1@a:kafka", `port "kafka": allowed: 1 to 65535`},
		{"wildcard host", "1@0.0.0.0:9093", "0.0.0.0 is not an address the other voters can dial"},
		{"wildcard IPv6 host", "1@[::]:9093", ":: is not an address the other voters can dial"},
		{"bad host character", "1@a!b:1", `host "a!b" is neither an IP address nor a host name`},
		{"slash in host", "1@a/b:1", `host "a/b" is neither`},
		{"non-ASCII host", "1@hôst:1", `contains U+00F4: allowed: printable ASCII`},
		{"control character", "1@a\x00:1", "contains U+0000"},
		{"escape sequence", "1@a\x1b[2J:1", "contains U+001B"},
		{"delete", "1@a\x7f:1", "contains U+007F"},
		{"host too long", "1@" + longHost + ":1", "neither an IP address nor a host name (allowed: at most 253"},
		{"id twice", "1@a:1,2@b:2,1@c:3", `node id 1 is given twice ("1@a:1" and "1@c:3"): allowed: each node id once`},
		{"id twice, leading zero", "1@a:1,01@b:2", `node id 1 is given twice ("1@a:1" and "01@b:2")`},
		{"address twice", "1@a:1,2@a:1", `address a:1 is given twice ("1@a:1" and "2@a:1"): allowed: each voter its own address`},
		{"address twice, other case", "1@Host:1,2@host:1", "address host:1 is given twice"},
		{"address twice, other spelling", "1@[::1]:9093,2@[0:0::1]:9093", "address [::1]:9093 is given twice"},
		{"address twice, leading zero in port", "1@a:9093,2@a:09093", "address a:9093 is given twice"},
		{"one too many", many(MaxVoters + 1), "65 entries: allowed: at most 64 voters"},
		{"far too many", strings.Repeat(",", 1<<20), "1048577 entries: allowed: at most 64 voters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseVoters(tc.in)
			if err == nil {
				t.Fatalf("accepted as %v", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is more than one line: %q", err)
			}
		})
	}
}

// A hostile value is named in the error, not echoed whole.
func TestParseVotersErrorsAreShort(t *testing.T) {
	huge := strings.Repeat("x", 1<<20)
	for _, in := range []string{huge, "1@" + huge, huge + "@a:1", "1@a:" + huge, "1@a:1,2@" + huge + ":1"} {
		_, err := ParseVoters(in)
		if err == nil {
			t.Fatalf("%d bytes accepted", len(in))
		}
		if len(err.Error()) > 400 {
			t.Fatalf("error for %d bytes is %d bytes long: %.200s", len(in), len(err.Error()), err)
		}
	}
}

// FuzzParseVoters checks, for any input: ParseVoters never panics; what
// it accepts is 1 to MaxVoters voters with distinct ids and addresses
// that FormatVoters writes back to a string parsing to the same voters;
// and it fails with a one-line message.
func FuzzParseVoters(f *testing.F) {
	for _, s := range []string{
		"", ",", "1@a:1", "1@a:1,2@b:2,3@c:3", "1@[::1]:9093", "1@a:1,1@a:1",
		"1@a:1,", "1@a:1\x00garbage", "-1@a:0", "1@" + strings.Repeat("a", 300) + ":1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		voters, err := ParseVoters(s)
		if err != nil {
			if voters != nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseVoters(%q) = %v, %q", s, voters, err)
			}
			return
		}
		if len(voters) == 0 || len(voters) > MaxVoters {
			t.Fatalf("ParseVoters(%q) accepted %d voters", s, len(voters))
		}
		if err := checkVoters(voters, nil); err != nil {
			t.Fatalf("ParseVoters(%q) accepted %v, which checkVoters refuses: %v", s, voters, err)
		}
		again, err := ParseVoters(FormatVoters(voters))
		if err != nil || !reflect.DeepEqual(again, voters) {
			t.Fatalf("ParseVoters(%q) = %v; reformatted and parsed again: %v, %v", s, voters, again, err)
		}
	})
}

func TestConfigVoters(t *testing.T) {
	voters := []Voter{{1, "127.0.0.1:19093"}, {2, "127.0.0.1:29093"}, {3, "127.0.0.1:39093"}}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string // "" for valid
	}{
		{"none: a cluster of one", func(c *Config) {}, ""},
		{"this node alone", func(c *Config) { c.Voters = voters[:1] }, ""},
		{"three", func(c *Config) { c.Voters, c.ControllerAddr = voters, voters[0].Addr }, ""},
		// The bind address may differ from the one the others dial
		// (NAT, a container's port mapping).
		{"bind differs from entry", func(c *Config) { c.Voters, c.ControllerAddr = voters, "127.0.0.1:9999" }, ""},
		{"node not a voter", func(c *Config) { c.NodeID, c.Voters = 4, voters },
			"node-id 4 is not one of the controller-quorum-voters (1, 2, 3): add this node's entry"},
		{"port 0 with other voters", func(c *Config) { c.Voters = voters },
			`controller-addr "127.0.0.1:0": with other controller-quorum-voters the port must be one they can dial (this node's entry says 1@127.0.0.1:19093), not 0`},
		{"id twice", func(c *Config) { c.Voters = []Voter{{1, "a:1"}, {1, "b:1"}} }, `controller-quorum-voters: node id 1 is given twice ("1@a:1" and "1@b:1")`},
		{"address twice", func(c *Config) { c.Voters = []Voter{{1, "a:1"}, {2, "a:1"}} }, "controller-quorum-voters: address a:1 is given twice"},
		{"negative id", func(c *Config) { c.Voters = []Voter{{1, "a:1"}, {-2, "b:1"}} }, `controller-quorum-voters: entry "-2@b:1": id -2 is not a node id`},
		{"bad address", func(c *Config) { c.Voters = []Voter{{1, "a:1"}, {2, "b"}} }, `controller-quorum-voters: entry "2@b": want host:port`},
		{"address with a comma", func(c *Config) { c.Voters = []Voter{{1, "a:1"}, {2, "b,3@c:1"}} }, `controller-quorum-voters: entry "2@b,3@c:1": host "b,3@c" is neither`},
		{"too many", func(c *Config) {
			c.Voters = nil
			for i := range MaxVoters + 1 {
				c.Voters = append(c.Voters, Voter{int32(i + 1), fmt.Sprintf("h:%d", i+1)})
			}
		}, "controller-quorum-voters: 65 voters: allowed: at most 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir()).withDefaults()
			tc.mod(&cfg)
			err := cfg.validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("validate: %v, want ErrInvalidConfig saying %q", err, tc.want)
			}
		})
	}
}

// A node given a voter list naming only itself is a cluster of one,
// bound where its entry says, and registers its rack.
func TestStartWithOwnVoterAndRack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := testConfig(t, t.TempDir())
	cfg.NodeID = 5
	cfg.Voters = []Voter{{5, addr}}
	cfg.ControllerAddr = addr
	cfg.Rack = "zone-a"
	n := startNode(t, cfg)
	meta, err := kadm.NewClient(newClient(t, n)).BrokerMetadata(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(meta.Brokers) != 1 || meta.Brokers[0].NodeID != 5 || meta.Brokers[0].Rack == nil || *meta.Brokers[0].Rack != "zone-a" {
		t.Fatalf("brokers %+v, want node 5 in rack zone-a", meta.Brokers)
	}
	if meta.Controller != 5 {
		t.Fatalf("controller %d, want 5", meta.Controller)
	}
}

func TestInvalidRackRefusedBeforeTouchingDisk(t *testing.T) {
	for _, tc := range []struct{ rack, want string }{
		{"r1\n", `rack "r1\n" contains U+000A`},
		{"\x1b[31mred", "contains U+001B"},
		{" r1", "starts or ends with a space"},
		{strings.Repeat("r", 256), "rack is 256 bytes long (allowed: at most 255)"},
		{strings.Repeat("r", 1<<20), "rack is 1048576 bytes long"},
		{"r\xff", "is not UTF-8"},
	} {
		cfg := testConfig(t, filepath.Join(t.TempDir(), "data"))
		cfg.Rack = tc.rack
		_, err := Start(context.Background(), cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("rack %.20q: Start: %.300v; want ErrInvalidConfig saying %q", tc.rack, err, tc.want)
		}
		if strings.Contains(fmt.Sprint(err), "INVALID_REQUEST") {
			t.Errorf("rack %.20q: the error carries a Kafka code: %v", tc.rack, err)
		}
		if _, err := os.Stat(cfg.DataDir); !os.IsNotExist(err) {
			t.Errorf("data dir created for an invalid rack (stat: %v)", err)
		}
	}
}
