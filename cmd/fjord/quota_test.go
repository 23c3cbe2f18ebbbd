package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fjord quota against the shared node. Quotas are cluster-wide state
// that would throttle the other tests' clients, so each test starts and
// ends with none (clearQuotas) and sets only generous defaults.

// clearQuotas removes every client quota on the shared node, with a
// client of the test's own rather than the commands under test.
func clearQuotas(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(rdClient(t))
	described, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil {
		t.Fatalf("describing client quotas: %v", err)
	}
	var entries []kadm.AlterClientQuotaEntry
	for _, d := range described {
		e := kadm.AlterClientQuotaEntry{Entity: d.Entity}
		for _, v := range d.Values {
			e.Ops = append(e.Ops, kadm.AlterClientQuotaOp{Key: v.Key, Remove: true})
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return
	}
	res, err := adm.AlterClientQuotas(ctx, entries)
	if err != nil {
		t.Fatalf("removing client quotas: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("removing the client quotas of %s: %v (%s)", r.Entity, r.Err, r.ErrMessage)
		}
	}
}

// quotaRows runs quota describe with args and returns its table's rows,
// each its three columns (entity texts here hold no spaces).
func quotaRows(t *testing.T, args ...string) [][]string {
	t.Helper()
	out := ok(t, "", append([]string{"quota", "describe"}, args...)...).stdout
	if out == "No client quotas.\n" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if got := strings.Fields(lines[0]); !slices.Equal(got, []string{"ENTITY", "KEY", "VALUE"}) {
		t.Fatalf("quota describe %s: header %q\n%s", strings.Join(args, " "), got, out)
	}
	var rows [][]string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func wantQuotaRows(t *testing.T, got [][]string, want ...string) {
	t.Helper()
	var w [][]string
	for _, row := range want {
		w = append(w, strings.Fields(row))
	}
	if !slices.EqualFunc(got, w, slices.Equal) {
		t.Fatalf("quota describe shows\n%q\nwant\n%q", got, w)
	}
}

// Reference: KIP-546. Set, describe (text, JSON, filters) and delete
// with every kind of entity, and every bad input refused in one line
// with nothing changed.
func TestQuotaSetDescribeDelete(t *testing.T) {
	clearQuotas(t)
	t.Cleanup(func() { clearQuotas(t) })
	b := brokers(t)

	if r := ok(t, "", "quota", "describe"); r.stdout != "No client quotas.\n" {
		t.Fatalf("describe with no quotas:\n%s", r.stdout)
	}
	if r := ok(t, "", "quota", "describe", "-o", "json"); r.stdout != "{\n  \"quotas\": []\n}\n" {
		t.Fatalf("describe -o json with no quotas:\n%s", r.stdout)
	}

	// Both forms of KEY=VALUE, and a byte rate with a unit.
	r := ok(t, "", "quota", "set", "--user", "alice", "producer_byte_rate=1MiB,consumer_byte_rate=2097152")
	if want := "set client quotas of user=alice: producer_byte_rate=1048576 consumer_byte_rate=2097152\n"; r.stdout != want {
		t.Fatalf("set printed %q, want %q", r.stdout, want)
	}
	ok(t, "", "quota", "set", "--client-id", "app", "request_percentage=12.5")
	ok(t, "", "quota", "set", "--user", "alice", "--client-id", "app", "producer_byte_rate=1000", "controller_mutation_rate=5")
	// Defaults large enough to slow nobody: every client here is
	// covered by them.
	ok(t, "", "quota", "set", "--user-default", "--client-id-default", "producer_byte_rate=1GiB")
	ok(t, "", "quota", "set", "--client-id-default", "consumer_byte_rate=1TB")
	// An address in another form is the same entity (kept canonical).
	ok(t, "", "quota", "set", "--ip", "::ffff:127.0.0.9", "connection_creation_rate=100")
	ok(t, "", "quota", "set", "--ip-default", "connection_creation_rate=1000")
	// Setting a key again replaces its value and keeps the others.
	ok(t, "", "quota", "set", "--user", "alice", "producer_byte_rate=2MiB")

	all := []string{
		"client-id=<default> consumer_byte_rate 1000000000000",
		"client-id=app request_percentage 12.5",
		"ip=127.0.0.9 connection_creation_rate 100",
		"ip=<default> connection_creation_rate 1000",
		"user=<default>,client-id=<default> producer_byte_rate 1073741824",
		"user=alice consumer_byte_rate 2097152",
		"user=alice producer_byte_rate 2097152",
		"user=alice,client-id=app controller_mutation_rate 5",
		"user=alice,client-id=app producer_byte_rate 1000",
	}
	wantQuotaRows(t, quotaRows(t), all...)

	// JSON: the documented fields, a default's null name, whole numbers
	// without decimals.
	out := ok(t, "", "quota", "describe", "-o", "json").stdout
	doc := decodeJSON(t, out)
	wantKeys(t, "describe -o json", doc, "quotas")
	quotas := list(t, doc["quotas"])
	if len(quotas) != 7 {
		t.Fatalf("describe -o json lists %d entities, want 7:\n%s", len(quotas), out)
	}
	for i, q := range quotas {
		m := wantKeys(t, fmt.Sprintf("quotas[%d]", i), q, "entity", "values")
		for j, p := range list(t, m["entity"]) {
			wantKeys(t, fmt.Sprintf("quotas[%d].entity[%d]", i, j), p, "type", "name", "default")
		}
	}
	var typed struct {
		Quotas []struct {
			Entity []struct {
				Type    string  `json:"type"`
				Name    *string `json:"name"`
				Default bool    `json:"default"`
			} `json:"entity"`
			Values map[string]json.Number `json:"values"`
		} `json:"quotas"`
	}
	if err := json.Unmarshal([]byte(out), &typed); err != nil {
		t.Fatal(err)
	}
	defaults := typed.Quotas[4] // user=<default>,client-id=<default>
	if len(defaults.Entity) != 2 || defaults.Entity[0].Type != "user" || defaults.Entity[0].Name != nil || !defaults.Entity[0].Default ||
		defaults.Entity[1].Type != "client-id" || defaults.Entity[1].Name != nil || !defaults.Entity[1].Default ||
		defaults.Values["producer_byte_rate"] != "1073741824" {
		t.Errorf("quotas[4] is %+v, want user and client-id defaults with producer_byte_rate 1073741824", defaults)
	}
	pair := typed.Quotas[6] // user=alice,client-id=app
	if len(pair.Entity) != 2 || pair.Entity[0].Type != "user" || pair.Entity[0].Name == nil || *pair.Entity[0].Name != "alice" || pair.Entity[0].Default ||
		pair.Entity[1].Type != "client-id" || pair.Entity[1].Name == nil || *pair.Entity[1].Name != "app" ||
		pair.Values["producer_byte_rate"] != "1000" || pair.Values["controller_mutation_rate"] != "5" || len(pair.Values) != 2 {
		t.Errorf("quotas[6] is %+v, want user alice, client-id app, producer_byte_rate 1000, controller_mutation_rate 5", pair)
	}
	if v := typed.Quotas[1].Values["request_percentage"]; v != "12.5" {
		t.Errorf("client-id=app request_percentage is %s in JSON, want 12.5", v)
	}

	// Filters: a name is exact, -default the default, other parts
	// allowed unless --strict.
	wantQuotaRows(t, quotaRows(t, "--user", "alice"), all[5:]...)
	wantQuotaRows(t, quotaRows(t, "--user", "alice", "--strict"), all[5:7]...)
	wantQuotaRows(t, quotaRows(t, "--client-id", "app"), all[1], all[7], all[8])
	wantQuotaRows(t, quotaRows(t, "--client-id", "app", "--strict"), all[1])
	wantQuotaRows(t, quotaRows(t, "--client-id-default"), all[0], all[4])
	wantQuotaRows(t, quotaRows(t, "--user-default", "--client-id-default", "--strict"), all[4])
	wantQuotaRows(t, quotaRows(t, "--user-default", "--strict"))
	wantQuotaRows(t, quotaRows(t, "--user", "alice", "--client-id", "app"), all[7:]...)
	wantQuotaRows(t, quotaRows(t, "--ip", "127.0.0.9"), all[2])
	wantQuotaRows(t, quotaRows(t, "--ip-default"), all[3])
	wantQuotaRows(t, quotaRows(t, "--user", "nobody"))
	if r := ok(t, "", "quota", "describe", "--user", "nobody", "-o", "json"); r.stdout != "{\n  \"quotas\": []\n}\n" {
		t.Errorf("describe -o json matching nothing:\n%s", r.stdout)
	}
	// FJORD_BROKERS, as for every client command.
	t.Setenv("FJORD_BROKERS", b)
	if r := fjord(t, "", "quota", "describe", "--ip-default"); r.code != 0 || !strings.Contains(r.stdout, "ip=<default>") {
		t.Errorf("describe with FJORD_BROKERS: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Bad input: one line each. All but the deletes of keys not set
	// (which only the node can know) are refused before anything is
	// sent, so they go to a port nothing listens on: a check left to the
	// node would fail there as "cannot reach".
	nowhere := closedPort(t)
	for _, c := range []struct {
		want string
		args []string
	}{
		{"name the entity", []string{"set", "producer_byte_rate=1"}},
		{"--ip cannot be combined with --user or --client-id", []string{"set", "--ip", "1.2.3.4", "--user", "bob", "connection_creation_rate=1"}},
		{"--ip cannot be combined with --user or --client-id", []string{"set", "--ip-default", "--client-id", "x", "connection_creation_rate=1"}},
		{"give --user NAME or --user-default, not both", []string{"set", "--user", "bob", "--user-default", "producer_byte_rate=1"}},
		{"give --client-id NAME or --client-id-default, not both", []string{"set", "--client-id", "x", "--client-id-default", "producer_byte_rate=1"}},
		{"--user: the name is empty", []string{"set", "--user", "", "producer_byte_rate=1"}},
		{`--ip "host.example": not an IP address`, []string{"set", "--ip", "host.example", "connection_creation_rate=1"}},
		{"no keys given", []string{"set", "--client-id", "app"}},
		{`unknown quota key "bogus_rate"`, []string{"set", "--client-id", "app", "bogus_rate=1"}},
		{`"producer_byte_rate": want KEY=VALUE`, []string{"set", "--client-id", "app", "producer_byte_rate"}},
		{"has an empty entry", []string{"set", "--client-id", "app", "producer_byte_rate=1,"}},
		{`producer_byte_rate="abc": want a number above 0`, []string{"set", "--client-id", "app", "producer_byte_rate=abc"}},
		{`producer_byte_rate="10%": want a number above 0`, []string{"set", "--client-id", "app", "producer_byte_rate=10%"}},
		{`producer_byte_rate="1.5MiB": want a number above 0`, []string{"set", "--client-id", "app", "producer_byte_rate=1.5MiB"}},
		{`request_percentage="5MiB": want a number above 0, e.g. 50`, []string{"set", "--client-id", "app", "request_percentage=5MiB"}},
		{`producer_byte_rate="-5": want a number above 0 (to lift the quota`, []string{"set", "--client-id", "app", "producer_byte_rate=-5"}},
		{`producer_byte_rate="0": want a number above 0`, []string{"set", "--client-id", "app", "producer_byte_rate=0"}},
		{`request_percentage="NaN": want a finite number`, []string{"set", "--client-id", "app", "request_percentage=NaN"}},
		{`request_percentage="+Inf": want a finite number`, []string{"set", "--client-id", "app", "request_percentage=+Inf"}},
		{`request_percentage="1e400": want a finite number`, []string{"set", "--client-id", "app", "request_percentage=1e400"}},
		{"want a whole number of bytes per second", []string{"set", "--client-id", "app", "producer_byte_rate=1.5"}},
		{"at most 1000000", []string{"set", "--client-id", "app", "request_percentage=2e6"}},
		{"producer_byte_rate given twice", []string{"set", "--client-id", "app", "producer_byte_rate=1,producer_byte_rate=2"}},
		{"producer_byte_rate given twice", []string{"set", "--client-id", "app", "producer_byte_rate=1", "producer_byte_rate=1"}},
		{"connection_creation_rate applies to ip entities only", []string{"set", "--client-id", "app", "connection_creation_rate=5"}},
		{"an ip entity takes connection_creation_rate only", []string{"set", "--ip", "127.0.0.9", "producer_byte_rate=5"}},
		// A good key beside a bad one: the good one is not set either.
		{`unknown quota key "bogus"`, []string{"set", "--client-id", "app", "producer_byte_rate=5", "bogus=1"}},
		{"delete takes key names, not KEY=VALUE", []string{"delete", "--client-id", "app", "request_percentage=5"}},
		{"no keys given", []string{"delete", "--client-id", "app"}},
		{"name the entity", []string{"delete", "request_percentage"}},
		{`unknown quota key "bogus"`, []string{"delete", "--client-id", "app", "bogus"}},
		{"request_percentage given twice", []string{"delete", "--client-id", "app", "request_percentage,request_percentage"}},
		// Known keys the entity does not have: refused, as
		// kafka-configs.sh refuses them, and the one it has stays.
		{"client-id=app has no consumer_byte_rate quota (it has only request_percentage); nothing deleted",
			[]string{"delete", "--client-id", "app", "request_percentage", "consumer_byte_rate"}},
		{"client-id=nobody has no producer_byte_rate quota (it has no quotas); nothing deleted",
			[]string{"delete", "--client-id", "nobody", "producer_byte_rate"}},
		{"give --user NAME or --user-default, not both", []string{"describe", "--user", "a", "--user-default"}},
		{"--ip cannot be combined with --user or --client-id", []string{"describe", "--ip", "1.2.3.4", "--client-id", "a"}},
		{"--strict needs an entity flag", []string{"describe", "--strict"}},
	} {
		to := nowhere
		if strings.Contains(c.want, "nothing deleted") {
			to = b // the node says what the entity has
		}
		fails(t, c.want, append(append([]string{"quota"}, c.args...), "--brokers", to)...)
	}
	wantQuotaRows(t, quotaRows(t), all...)

	// Deleting one key, then the last: the entity is gone.
	r = ok(t, "", "quota", "delete", "--user", "alice", "consumer_byte_rate")
	if want := "deleted client quotas of user=alice: consumer_byte_rate\n"; r.stdout != want {
		t.Fatalf("delete printed %q, want %q", r.stdout, want)
	}
	wantQuotaRows(t, quotaRows(t, "--user", "alice", "--strict"), "user=alice producer_byte_rate 2097152")
	ok(t, "", "quota", "delete", "--user", "alice", "producer_byte_rate")
	wantQuotaRows(t, quotaRows(t, "--user", "alice", "--strict"))
	ok(t, "", "quota", "delete", "--user", "alice", "--client-id", "app", "producer_byte_rate,controller_mutation_rate")
	ok(t, "", "quota", "delete", "--ip-default", "connection_creation_rate")
	wantQuotaRows(t, quotaRows(t), all[0], all[1], all[2], all[4])
}

// A node's refusal is printed in its own words, after the code's name.
func TestQuotaServerRefusal(t *testing.T) {
	err := alteredErr(kadm.AlteredClientQuotas{{Err: kerr.InvalidRequest, ErrMessage: "invalid client quota: 100000 entities have quotas already (at most 100000); remove some first"}})
	if want := "INVALID_REQUEST: invalid client quota: 100000 entities have quotas already (at most 100000); remove some first"; err == nil || err.Error() != want {
		t.Fatalf("alteredErr = %v, want %q", err, want)
	}
	if err := alteredErr(kadm.AlteredClientQuotas{{}}); err != nil {
		t.Fatalf("alteredErr of a success = %v", err)
	}
	if err := alteredErr(nil); err == nil {
		t.Fatal("alteredErr of no entries = nil")
	}
}

// Names a table could misread are quoted, so each entity has one text.
func TestQuotaEntityText(t *testing.T) {
	name := func(s string) *string { return &s }
	for _, c := range []struct {
		parts []quotaEntityPart
		want  string
	}{
		{[]quotaEntityPart{{Type: "user", Name: name("alice")}, {Type: "client-id", Default: true}}, "user=alice,client-id=<default>"},
		{[]quotaEntityPart{{Type: "client-id", Name: name("<default>")}}, `client-id="<default>"`},
		{[]quotaEntityPart{{Type: "client-id", Name: name("a,b=c")}}, `client-id="a,b=c"`},
		{[]quotaEntityPart{{Type: "client-id", Name: name("two words")}}, `client-id="two words"`},
		{[]quotaEntityPart{{Type: "client-id", Name: name("line\nbreak")}}, `client-id="line\nbreak"`},
		{[]quotaEntityPart{{Type: "client-id", Name: name("\xff")}}, `client-id="\xff"`},
		{[]quotaEntityPart{{Type: "client-id", Name: name("émile-1.0_x:y@z/w")}}, "client-id=émile-1.0_x:y@z/w"},
	} {
		if got := partsText(c.parts); got != c.want {
			t.Errorf("partsText(%+v) = %s, want %s", c.parts, got, c.want)
		}
	}
}

// throttleCounter counts the responses a client saw throttled.
type throttleCounter struct{ n atomic.Int64 }

func (c *throttleCounter) OnBrokerThrottle(kgo.BrokerMetadata, time.Duration, bool) { c.n.Add(1) }

// A producer_byte_rate set with the command bites the client id it names,
// and no other.
func TestQuotaThrottlesProducer(t *testing.T) {
	clearQuotas(t)
	t.Cleanup(func() { clearQuotas(t) })
	topic := topicName("quota-throttled")
	ok(t, "", "topic", "create", topic)
	slow, other := topicName("quota-slow"), topicName("quota-other")
	ok(t, "", "quota", "set", "--client-id", slow, "producer_byte_rate=1KiB")

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	produce := func(clientID string, records int) int64 {
		var throttles throttleCounter
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers(t)), kgo.ClientID(clientID), kgo.WithHooks(&throttles))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		// 4 KiB records: each one is four seconds of a 1 KiB/s quota, so
		// the first produce already overdraws it.
		for range records {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: make([]byte, 4<<10)}).FirstErr(); err != nil {
				t.Fatalf("producing as %s: %v", clientID, err)
			}
			if throttles.n.Load() > 0 {
				break
			}
		}
		return throttles.n.Load()
	}
	if n := produce(other, 3); n != 0 {
		t.Errorf("client id %s, which no quota covers, was throttled %d times", other, n)
	}
	if n := produce(slow, 3); n == 0 {
		t.Errorf("client id %s, with producer_byte_rate=1KiB, was never throttled", slow)
	}
}
