package metadata

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// BrokerRecord.Listeners, from metadata version 9: each name once, a
// host, a port, a known protocol, the inter-broker endpoint among them;
// kept through a snapshot; Endpoint answers by name, and a broker
// registered without listeners answers every name at Host and Port.
func TestApplyBrokerListeners(t *testing.T) {
	ls := []Endpoint{
		{Name: "INTERNAL", Host: "10.0.0.4", Port: 9092, SecurityProtocol: 3},
		{Name: "CLIENT", Host: "broker4.example.com", Port: 9094, SecurityProtocol: 3},
	}
	rec := BrokerRecord{NodeID: 4, Host: "10.0.0.4", Port: 9092, Listeners: ls}
	if _, err := baseImage(t).Apply(11, rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 9") {
		t.Fatalf("listeners in a version-1 log: %v, want ErrBadRecord naming version 9", err)
	}
	base, err := baseImage(t).Apply(11, MetadataVersionRecord{Version: ListenersMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("h", 256)
	for _, tc := range []struct {
		name string
		ls   []Endpoint
		msg  string
	}{
		{"empty name", []Endpoint{{Host: "10.0.0.4", Port: 9092}}, "listener name"},
		{"empty host", []Endpoint{{Name: "A", Port: 9092}}, "host"},
		{"long host", []Endpoint{{Name: "A", Host: long, Port: 9092}}, "host"},
		{"port 0", []Endpoint{{Name: "A", Host: "10.0.0.4", Port: 0}}, "port 0"},
		{"port too big", []Endpoint{{Name: "A", Host: "10.0.0.4", Port: 70000}}, "port 70000"},
		{"protocol", []Endpoint{{Name: "A", Host: "10.0.0.4", Port: 9092, SecurityProtocol: 7}}, "security protocol 7"},
		{"twice", []Endpoint{ls[0], ls[0]}, "named twice"},
		{"no inter-broker", ls[1:], "inter-broker endpoint"},
		{"too many", make([]Endpoint, MaxBrokerListeners+1), "at most 16"},
	} {
		r := rec
		r.Listeners = tc.ls
		if _, err := base.Apply(12, r); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want ErrBadRecord naming %q", tc.name, err, tc.msg)
		}
	}
	img, err := base.Apply(12, rec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := img.Broker(4)
	if host, port, ok := b.Endpoint("CLIENT"); !ok || host != "broker4.example.com" || port != 9094 {
		t.Errorf("Endpoint(CLIENT) = %s:%d %v", host, port, ok)
	}
	if _, _, ok := b.Endpoint("PLAINTEXT"); ok {
		t.Error("a broker with listeners answers a listener it lacks")
	}
	old, _ := img.Broker(1)
	if host, port, ok := old.Endpoint("ANY"); !ok || host != old.Host || port != old.Port {
		t.Errorf("a registration without listeners: Endpoint = %s:%d %v, want its host and port", host, port, ok)
	}
	ls[0].Host = "changed" // the image keeps its own copy
	b, _ = img.Broker(4)
	if b.Listeners[0].Host != "10.0.0.4" {
		t.Error("the image shares the record's listeners")
	}

	enc, err := EncodeImage(img)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := DecodeImage(enc, img.TopicConfigs)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := dec.Broker(4); !reflect.DeepEqual(got, b) {
		t.Errorf("after a snapshot: %+v, want %+v", got, b)
	}
}
