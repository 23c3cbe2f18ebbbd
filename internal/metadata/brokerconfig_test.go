package metadata

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every dynamic broker config names a Kafka config type and has a doc
// and a check (DescribeConfigs reports the type; a nil check would
// panic on the first value).
func TestDynamicBrokerConfigTypes(t *testing.T) {
	for name, def := range DynamicBrokerConfigs {
		if _, err := kmsg.ParseConfigType(def.Type); err != nil || def.Doc == "" || def.check == nil {
			t.Errorf("%s: type %q (%v), doc %q, check %v", name, def.Type, err, def.Doc, def.check != nil)
		}
	}
}

// The connection configs: each value allowed by its own rule, and every
// refusal an ErrInvalidConfig naming the config, the value (cut short
// when long) and what is allowed.
func TestValidateConnectionConfigs(t *testing.T) {
	good := map[string][]string{
		MaxConnectionsConfig:      {"1", "1000", "2147483647"},
		MaxConnectionsPerIPConfig: {"0", "5", "2147483647"},
		MaxConnectionsPerIPOverridesConfig: {
			"",
			"127.0.0.2:5",
			"10.0.0.7:200, 10.0.0.8:0",
			"::1:5",
			"[2001:db8::1]:50",
			"fe80::1%eth0:3",
			"broker-1.example.com:100,10.0.0.7:2",
			"Host.Example.:4",
		},
	}
	for name, values := range good {
		for _, v := range values {
			if err := ValidateBrokerConfig(name, v); err != nil {
				t.Errorf("%s=%q: %v", name, v, err)
			}
		}
	}
	manyEntries := strings.Repeat("1.2.3.4:1,", 9999) + "1.2.3.4:1" // 10,000 entries, 99,999 bytes
	type bad struct{ value, msg string }
	counts := func(least string) []bad {
		return []bad{
			{"-1", "from " + least + " to 2147483647"},
			{"", "whole number"},
			{"ten", "whole number"},
			{"1.5", "whole number"},
			{" 5", "whole number"},
			{"5 connections", "whole number"},
			{"2147483648", "to 2147483647"},
			{"99999999999999999999", "to 2147483647"},
		}
	}
	for name, cases := range map[string][]bad{
		MaxConnectionsConfig:      append(counts("1"), bad{"0", "from 1 to"}),
		MaxConnectionsPerIPConfig: counts("0"),
		MaxConnectionsPerIPOverridesConfig: {
			{"a:b", `entry 1 "a:b": the count is not a whole number`},
			{":3", `entry 1 ":3": no host`},
			{"[]:3", "no host"},
			{"1.2.3.4", `entry 1 "1.2.3.4": no count`},
			{"1.2.3.4:-1", "the count is not a whole number from 0 to 2147483647"},
			{"1.2.3.4:", "the count is not a whole number"},
			{"1.2.3.4:2147483648", "from 0 to 2147483647"},
			{"1.2.3.4:1,1.2.3.4:2", `entry 2 "1.2.3.4:2": 1.2.3.4 is given more than once`},
			{"::ffff:1.2.3.4:1,1.2.3.4:2", "1.2.3.4 is given more than once"},
			{"host.example:1,HOST.example:2", "is given more than once"},
			{"1.2.3.4:1,,5.6.7.8:1", "entry 2 \"\": empty"},
			{"1.2.3.4:1,", "entry 2 \"\": empty"},
			{",", "entry 1 \"\": empty"},
			{" ", "entry 1 \"\": empty"},
			{"1.2.3:5", "neither an IP address nor a host name"},
			{"1.2.3.400:5", "neither an IP address nor a host name"},
			{"under_score:5", "neither an IP address nor a host name"},
			{"-lead.example:5", "neither an IP address nor a host name"},
			{"a..b:5", "neither an IP address nor a host name"},
			{"\xff\xfe:5", "neither an IP address nor a host name"},
			{strings.Repeat("a", 64) + ".example:5", "neither an IP address nor a host name"},
			{strings.Repeat("a.", 127) + "ab:5", "neither an IP address nor a host name"}, // 256 bytes
			{manyEntries, "the value is 99999 bytes; at most 65536"},
		},
	} {
		for _, tc := range cases {
			err := ValidateBrokerConfig(name, tc.value)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name+"=") || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("%s=%.40q: %v, want ErrInvalidConfig naming %s and %q", name, tc.value, err, name, tc.msg)
			}
			if err != nil && len(err.Error()) > 600 {
				t.Errorf("%s=%.40q: a %d-byte message", name, tc.value, len(err.Error()))
			}
		}
	}
	// The refusal of an unknown name lists the dynamic ones.
	err := ValidateBrokerConfig("max.connection.creation.rate", "10")
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "not a dynamic broker config") ||
		!strings.Contains(err.Error(), MaxConnectionsPerIPOverridesConfig) || !strings.Contains(err.Error(), FollowerThrottleRateConfig) {
		t.Errorf("unknown name: %v", err)
	}
}

// ConnectionLimits: each config the broker's own, else the default;
// overrides are the IP literals only, unmapped and without zones.
func TestImageConnectionLimits(t *testing.T) {
	v5, err := baseImage(t).Apply(11, MetadataVersionRecord{Version: BrokerConfigMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	if l := v5.ConnectionLimits(1); l.MaxConnections != NoConnectionLimit || l.MaxConnectionsPerIP != NoConnectionLimit ||
		l.PerIPOverrides == nil || len(l.PerIPOverrides) != 0 || l.PerIPLimit(netip.MustParseAddr("10.0.0.1")) != NoConnectionLimit {
		t.Fatalf("no configs: %+v", l)
	}
	set := func(broker int32, name, v string) BrokerConfigRecord {
		return BrokerConfigRecord{Broker: broker, Name: name, Value: &v}
	}
	img, err := v5.Apply(12,
		set(-1, MaxConnectionsConfig, "1000"),
		set(-1, MaxConnectionsPerIPConfig, "10"),
		set(-1, MaxConnectionsPerIPOverridesConfig, "10.0.0.7:200, ::ffff:10.0.0.8:0,fe80::1%eth0:3, broker-1.example.com:100"),
		set(2, MaxConnectionsConfig, "50"),
		set(2, MaxConnectionsPerIPOverridesConfig, ""),
	)
	if err != nil {
		t.Fatal(err)
	}
	l := img.ConnectionLimits(1)
	want := map[netip.Addr]int{
		netip.MustParseAddr("10.0.0.7"): 200,
		netip.MustParseAddr("10.0.0.8"): 0,
		netip.MustParseAddr("fe80::1"):  3,
	}
	if l.MaxConnections != 1000 || l.MaxConnectionsPerIP != 10 || !maps.Equal(l.PerIPOverrides, want) {
		t.Fatalf("broker 1 (the defaults): %+v", l)
	}
	for addr, n := range map[string]int{"10.0.0.7": 200, "10.0.0.8": 0, "10.0.0.9": 10} {
		if got := l.PerIPLimit(netip.MustParseAddr(addr)); got != n {
			t.Errorf("PerIPLimit(%s) = %d, want %d", addr, got, n)
		}
	}
	// Broker 2's own values win, an empty overrides list included.
	l = img.ConnectionLimits(2)
	if l.MaxConnections != 50 || l.MaxConnectionsPerIP != 10 || len(l.PerIPOverrides) != 0 {
		t.Fatalf("broker 2 (its own): %+v", l)
	}
	// Refused values never reach the image.
	for _, rec := range []BrokerConfigRecord{
		set(1, MaxConnectionsConfig, "0"),
		set(1, MaxConnectionsPerIPConfig, "-1"),
		set(1, MaxConnectionsPerIPOverridesConfig, "1.2.3.4"),
	} {
		if _, err := img.Apply(13, rec); !errors.Is(err, ErrBadRecord) {
			t.Errorf("%s=%s: %v, want ErrBadRecord", rec.Name, *rec.Value, err)
		}
	}
}

func TestIsHostName(t *testing.T) {
	for s, want := range map[string]bool{
		"localhost": true, "a": true, "broker-1.example.com": true, "example.com.": true, "1a.example": true, "x.1a": true,
		"": false, ".": false, "a..b": false, "-a": false, "a-": false, "a_b": false, "1.2.3": false, "123": false,
		strings.Repeat("a", 63): true, strings.Repeat("a", 64): false,
	} {
		if got := isHostName(s); got != want {
			t.Errorf("isHostName(%q) = %v, want %v", s, got, want)
		}
	}
}

// A hostile name or value does not fill the message.
func TestValidateBrokerConfigShortMessages(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{strings.Repeat("n", 40000), "1"},
		{MaxConnectionsConfig, strings.Repeat("9", 40000)},
		{MaxConnectionsPerIPOverridesConfig, strings.Repeat("x", 60000) + ":1"},
	} {
		err := ValidateBrokerConfig(tc.name, tc.value)
		if err == nil || len(err.Error()) > 600 {
			t.Errorf("%.20s=%.20s: %d-byte message %v", tc.name, tc.value, len(fmt.Sprint(err)), err)
		}
	}
}
