package controller

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fjordmq/fjord/internal/freeport"
	"github.com/fjordmq/fjord/internal/testutil"
)

// openLogged opens a controller with cfg (Dir and Addr set by the
// caller) whose logs go to logs, at info and above.
func openLogged(t *testing.T, cfg Config, logs io.Writer) *Controller {
	t.Helper()
	cfg.TopicConfigs = testConfigs
	cfg.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	c, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open node %d: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// loopbackAddrs is n controller addresses on 127.0.0.1, from freeport:
// they are named in voter lists before anything binds them.
func loopbackAddrs(t *testing.T, n int) []string {
	t.Helper()
	ports, err := freeport.Take("127.0.0.1", n)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs
}

func withClusterID(t *testing.T, c *Controller) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if c.Image().ClusterID == "" {
			return errString("no cluster id yet")
		}
		return nil
	})
}

func fileQuorumID(t *testing.T, dir string) quorumID {
	t.Helper()
	id, found, err := readQuorumIDFile(dir)
	if err != nil || !found {
		t.Fatalf("%s in %s: found %v, %v", quorumIDFile, dir, found, err)
	}
	return id
}

// refusedFrom is how many Raft connections from host naming id route has
// refused (within refusalLogInterval of the first).
func (m *muxLayer) refusedFrom(host string, id quorumID) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.mu.refusals.last[host+" "+id.String()]
	if !ok {
		return 0
	}
	return 1 + e.suppressed
}

// quorumState is what another quorum's leader would change in a node it
// replicated to.
type quorumState struct {
	leader         int32
	term           int64
	lastIndex      uint64
	offset         uint64
	clusterID      string
	voters, others string
}

func quorumStateOf(t *testing.T, c *Controller) quorumState {
	t.Helper()
	st, err := c.RaftStats()
	if err != nil {
		t.Fatal(err)
	}
	return quorumState{leader: c.ControllerID(), term: c.QuorumState().Epoch, lastIndex: st.LastIndex,
		offset: c.Image().Offset, clusterID: c.Image().ClusterID,
		voters: fmt.Sprint(c.Voters()), others: fmt.Sprint(c.observers())}
}

// Two quorums, one address: quorum A's voter list names, as its voter
// 3, the address where quorum B's only voter (also node 3) listens, as
// when a port one cluster's controller released is bound by another's.
// A's candidates and leader dial B at every election and heartbeat. B
// must refuse them, say so, and keep its own log, term and leadership;
// A, two of three voters up, still elects and commits.
//
// Regression: a test's one-voter controller took a port another
// cluster's controller had just released, and that cluster's leader
// replaced the test's metadata log with its own ("failed to get
// previous log", then term 3 and metadata offset 19 from the foreign
// log).
func TestAnotherQuorumCannotReplicateHere(t *testing.T) {
	addrs := loopbackAddrs(t, 3)
	var bLogs testutil.Buffer
	b := openLogged(t, Config{NodeID: 3, Dir: t.TempDir(), Addr: addrs[2]}, &bLogs)
	leading(t, b)
	withClusterID(t, b)
	before := quorumStateOf(t, b)

	voters := []Voter{{NodeID: 1, Addr: addrs[0]}, {NodeID: 2, Addr: addrs[1]}, {NodeID: 3, Addr: addrs[2]}}
	var aLogs testutil.Buffer
	a := []*Controller{
		openLogged(t, Config{NodeID: 1, Dir: t.TempDir(), Addr: addrs[0], Voters: voters}, &aLogs),
		openLogged(t, Config{NodeID: 2, Dir: t.TempDir(), Addr: addrs[1], Voters: voters}, &aLogs),
	}
	// A works for what it can: it elects and commits with two of its
	// three voters.
	var aLeader *Controller
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, c := range a {
			if c.raft.State() == raft.Leader && c.Image().ClusterID != "" {
				aLeader = c
				return nil
			}
		}
		return errString("quorum A has no leader with a cluster id yet")
	})
	if err := aLeader.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("quorum A commits with two of three voters: %v", err)
	}

	idA, idB := fileQuorumID(t, a[0].cfg.Dir), fileQuorumID(t, b.cfg.Dir)
	if other := fileQuorumID(t, a[1].cfg.Dir); other != idA || idA != quorumIDOf(voters) {
		t.Fatalf("quorum A's voters have ids %s and %s, want both %s", idA, other, quorumIDOf(voters))
	}
	if idA == idB {
		t.Fatalf("both quorums have id %s", idA)
	}

	// Until B has refused A's leader a few times, or B has changed (it
	// took A's log: what happens without the handshake). Either way the
	// checks below say which.
	refusal := `level=WARN msg="refused a Raft connection from another controller quorum: its voter list names this node's address"`
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := b.mux.refusedFrom("127.0.0.1", idA); n < 5 && quorumStateOf(t, b) == before {
			return fmt.Errorf("B refused A %d times so far", n)
		}
		return nil
	})
	if after := quorumStateOf(t, b); after != before {
		t.Errorf("quorum B changed under quorum A's leader:\nbefore %+v\nafter  %+v\nB's log:\n%s\nA's log:\n%s",
			before, after, bLogs.String(), aLogs.String())
	}
	if err := b.Err(); err != nil {
		t.Errorf("quorum B failed: %v", err)
	}
	if !strings.Contains(bLogs.String(), refusal) {
		t.Fatalf("B logged no refusal:\n%s", bLogs.String())
	}
	for _, want := range []string{" quorum_id=" + idB.String(), " remote_quorum_id=" + idA.String(), " remote_addr=127.0.0.1:"} {
		if !strings.Contains(bLogs.String(), want) {
			t.Errorf("B's refusal does not name %s:\n%s", want, bLogs.String())
		}
	}
	// Once a minute per host and id, not once per heartbeat.
	if n := strings.Count(bLogs.String(), refusal); n != 1 {
		t.Errorf("B logged the refusal %d times, want 1 (rate-limited):\n%s", n, bLogs.String())
	}
	// B still takes changes, in its own term.
	if err := b.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("quorum B commits: %v", err)
	}
	if st := quorumStateOf(t, b); st.term != before.term || st.leader != 3 || st.clusterID != before.clusterID {
		t.Fatalf("quorum B after a commit: %+v, was %+v", st, before)
	}
}

// The quorum id file: written at bootstrap, read back on restart,
// derived from the log when a directory from before it lacks it, and a
// damaged one stops Open.
func TestQuorumIDFileAcrossRestarts(t *testing.T) {
	dir, addr := t.TempDir(), loopbackAddrs(t, 1)[0]
	cfg := Config{NodeID: 1, Dir: dir, Addr: addr}
	var logs testutil.Buffer
	c := openLogged(t, cfg, &logs)
	leading(t, c)
	want := quorumIDOf([]Voter{{NodeID: 1, Addr: addr}})
	if got := fileQuorumID(t, dir); got != want || c.mux.quorumID() != want {
		t.Fatalf("after bootstrap: file %s, in use %s, want %s", got, c.mux.quorumID(), want)
	}
	c.Close()

	reopen := func(what string) *Controller {
		t.Helper()
		logs = testutil.Buffer{}
		c := openLogged(t, cfg, &logs)
		if got := c.mux.quorumID(); got != want {
			t.Fatalf("%s: quorum id %s, want %s", what, got, want)
		}
		if got := fileQuorumID(t, dir); got != want {
			t.Fatalf("%s: file %s, want %s", what, got, want)
		}
		return c
	}
	c = reopen("restart")
	if strings.Contains(logs.String(), "derived") {
		t.Fatalf("a restart with the file derived the id:\n%s", logs.String())
	}
	c.Close()

	// A directory from before quorum.id: derived from the log's
	// bootstrap entry, and written.
	if err := os.Remove(filepath.Join(dir, quorumIDFile)); err != nil {
		t.Fatal(err)
	}
	c = reopen("restart without the file")
	if !strings.Contains(logs.String(), "derived the controller quorum id from the metadata log's bootstrap entry") {
		t.Fatalf("no word of the derivation:\n%s", logs.String())
	}
	c.Close()

	// Without the file and with a voter list that is not the one the log
	// was bootstrapped with: unknown, said at WARN, nothing written.
	if err := os.Remove(filepath.Join(dir, quorumIDFile)); err != nil {
		t.Fatal(err)
	}
	changed := cfg
	changed.Voters = []Voter{{NodeID: 1, Addr: addr}, {NodeID: 2, Addr: "127.0.0.1:1"}}
	logs = testutil.Buffer{}
	c = openLogged(t, changed, &logs)
	if id := c.mux.quorumID(); id.known() {
		t.Fatalf("with a changed voter list the id was derived as %s", id)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"the controller quorum id is unknown") {
		t.Fatalf("no warning of the unknown id:\n%s", logs.String())
	}
	if _, found, _ := readQuorumIDFile(dir); found {
		t.Fatal("an unknown id was written")
	}
	c.Close()

	for _, damaged := range []string{"", "xyz\n", strings.Repeat("0", 32) + "\n", want.String(), want.String() + "\nmore"} {
		if err := os.WriteFile(filepath.Join(dir, quorumIDFile), []byte(damaged), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := cfg
		cfg.TopicConfigs = testConfigs
		if c, err := Open(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "fix or remove it") {
			if c != nil {
				c.Close()
			}
			t.Errorf("Open with %s holding %q: %v, want an error saying to fix or remove it", quorumIDFile, damaged, err)
		}
	}
}

// An observer learns the quorum id from the leader's answer to its
// join and writes it. One restarted without the file, whose log cannot
// tell the id (the leader sent it a snapshot, so its log does not start
// with the bootstrap entry), is in the configuration already and asks
// again only to learn the id.
func TestObserverLearnsTheQuorumID(t *testing.T) {
	addrs := loopbackAddrs(t, 2)
	voter := openLogged(t, Config{NodeID: 1, Dir: t.TempDir(), Addr: addrs[0], TrailingLogs: 1}, io.Discard)
	leading(t, voter)
	withClusterID(t, voter)
	if err := voter.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if err := voter.SnapshotNow(); err != nil {
		t.Fatal(err)
	}
	if st, _ := voter.RaftStats(); st.FirstIndex <= 1 {
		t.Fatalf("the voter's log still starts at %d after a snapshot", st.FirstIndex)
	}
	want := voter.mux.quorumID()

	obsCfg := Config{NodeID: 4, Dir: t.TempDir(), Addr: addrs[1], Observer: true, Voters: []Voter{{NodeID: 1, Addr: addrs[0]}}}
	if _, found, _ := readQuorumIDFile(obsCfg.Dir); found {
		t.Fatal("a new observer has an id file")
	}
	learned := func(what string, obs *Controller, logs *testutil.Buffer) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error {
			if !obs.inConfiguration() || obs.Image().ClusterID != voter.Image().ClusterID {
				return errString("node 4 does not follow the log yet")
			}
			if got := obs.mux.quorumID(); got != want {
				return fmt.Errorf("the observer's quorum id is %s, want %s", got, want)
			}
			if !strings.Contains(logs.String(), "learned the controller quorum id from the leader") {
				return errString("no word of the learning yet")
			}
			return nil
		})
		if got := fileQuorumID(t, obsCfg.Dir); got != want {
			t.Fatalf("%s: the observer wrote %s, want %s", what, got, want)
		}
	}
	var logs testutil.Buffer
	obs := openLogged(t, obsCfg, &logs)
	learned("first join", obs, &logs)
	var first raft.Log
	if err := obs.store.GetLog(1, &first); err == nil {
		t.Fatal("the observer's log holds the bootstrap entry: it was sent no snapshot, so this test cannot show what it means to")
	}
	obs.Close()

	if err := os.Remove(filepath.Join(obsCfg.Dir, quorumIDFile)); err != nil {
		t.Fatal(err)
	}
	logs = testutil.Buffer{}
	obs = openLogged(t, obsCfg, &logs)
	learned("restart without the file", obs, &logs)
}

// Whatever arrives on the controller port, it closes the connection
// without an answer, or hands it to Raft, which closes it on garbage;
// the quorum keeps committing, its configuration unchanged.
func TestControllerPortHostileInput(t *testing.T) {
	var logs testutil.Buffer
	c := openLogged(t, Config{NodeID: 1, Dir: t.TempDir(), Addr: "127.0.0.1:0"}, &logs)
	leading(t, c)
	withClusterID(t, c)
	own := c.mux.quorumID()
	other := quorumIDOf([]Voter{{NodeID: 9, Addr: "127.0.0.1:1"}})
	hello := func(id quorumID, rest ...byte) []byte {
		return append(append([]byte{quorumHelloByte}, id[:]...), rest...)
	}
	garbage := bytes.Repeat([]byte{0xff}, 64)
	before := quorumStateOf(t, c)
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"nothing", nil},
		{"the hello byte alone", []byte{quorumHelloByte}},
		{"a hello cut short", hello(own)[:9]},
		{"a hello one byte short", hello(own)[:quorumIDLen]},
		{"an unknown first byte", append([]byte{0x7f}, garbage...)},
		{"another quorum's hello and garbage", hello(other, garbage...)},
		{"a raw Raft type and garbage", append([]byte{0}, garbage...)},
		{"a raw RequestPreVote type and garbage", append([]byte{maxRaftRPCType}, garbage...)},
		{"this quorum's hello and garbage", hello(own, garbage...)},
		{"an unknown id's hello and garbage", hello(quorumID{}, garbage...)},
		{"a hello and one too many bytes", hello(own, 0xF2)},
		{"this quorum's hello, then a join byte", hello(own, joinRequestByte, '{', '}', '\n')},
	} {
		conn, err := net.Dial("tcp", c.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(3 * time.Second))
		if _, err := conn.Write(tc.send); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		// The end of what a hostile peer sends: route must not wait for
		// more than it has.
		conn.(*net.TCPConn).CloseWrite()
		n, err := io.Copy(io.Discard, conn)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("%s: the connection is still open after 3s", tc.name)
		} else if n > 0 {
			t.Errorf("%s: answered %d bytes", tc.name, n)
		}
		conn.Close()
	}
	if err := c.raft.Barrier(5 * time.Second).Error(); err != nil {
		t.Fatalf("commit after hostile input: %v", err)
	}
	after := quorumStateOf(t, c)
	after.lastIndex, after.offset = before.lastIndex, before.offset // the Barrier's own entry
	if after != before {
		t.Fatalf("hostile input changed the quorum:\nbefore %+v\nafter  %+v", before, after)
	}
	// Both refusals named, once each, though each kind came twice or more.
	for msg, want := range map[string]int{
		"refused a Raft connection from another controller quorum":   1,
		"refused a Raft connection that did not name its controller": 1,
	} {
		if n := strings.Count(logs.String(), msg); n != want {
			t.Errorf("%q logged %d times, want %d:\n%s", msg, n, want, logs.String())
		}
	}
}

// admitRaft, case by case (join.go's comment block).
func TestAdmitRaft(t *testing.T) {
	a := quorumIDOf([]Voter{{NodeID: 1, Addr: "127.0.0.1:1"}})
	b := quorumIDOf([]Voter{{NodeID: 1, Addr: "127.0.0.1:2"}})
	var unknown quorumID
	for _, tc := range []struct {
		name   string
		own    quorumID
		hello  bool
		remote quorumID
		want   bool
	}{
		{"own unknown, no hello (a Fjord from before the handshake)", unknown, false, unknown, true},
		{"own unknown, any hello", unknown, true, b, true},
		{"own known, no hello", a, false, unknown, false},
		{"own known, hello of the same", a, true, a, true},
		{"own known, hello of another", a, true, b, false},
		{"own known, hello of an unknown id", a, true, unknown, true},
	} {
		if got := admitRaft(tc.own, tc.hello, tc.remote); got != tc.want {
			t.Errorf("%s: admitRaft = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// quorumIDOf depends on the list, not on its order or how an address is
// written.
func TestQuorumIDOf(t *testing.T) {
	list := []Voter{{NodeID: 1, Addr: "ctrl1:9093"}, {NodeID: 2, Addr: "10.0.0.2:9093"}, {NodeID: 3, Addr: "[2001:db8::3]:9093"}}
	id := quorumIDOf(list)
	same := [][]Voter{
		{list[2], list[0], list[1]},
		{{NodeID: 1, Addr: "CTRL1:9093"}, list[1], {NodeID: 3, Addr: "[2001:DB8:0::3]:9093"}},
	}
	for _, l := range same {
		if got := quorumIDOf(l); got != id {
			t.Errorf("quorumIDOf(%v) = %s, want %s as for %v", l, got, id, list)
		}
	}
	differ := [][]Voter{
		list[:2],
		{{NodeID: 1, Addr: "ctrl1:9094"}, list[1], list[2]},
		{{NodeID: 4, Addr: "ctrl1:9093"}, list[1], list[2]},
		{{NodeID: 1, Addr: "10.0.0.2:9093"}, {NodeID: 2, Addr: "ctrl1:9093"}, list[2]},
	}
	for _, l := range differ {
		if got := quorumIDOf(l); got == id || !got.known() {
			t.Errorf("quorumIDOf(%v) = %s, the same as %v's or unknown", l, got, list)
		}
	}
	if p, err := parseQuorumID(id.String()); err != nil || p != id {
		t.Errorf("parseQuorumID(%s) = %s, %v", id, p, err)
	}
	for _, bad := range []string{"", "zz", id.String()[:30], id.String() + "00", strings.Repeat("0", 32), strings.Repeat("g", 32)} {
		if _, err := parseQuorumID(bad); err == nil {
			t.Errorf("parseQuorumID(%q) accepted", bad)
		}
	}
}

// derivedQuorumID takes the bootstrap entry of a log from before the id
// only when it can tell the list it was bootstrapped with, and then
// gives what a new bootstrap with that list gives, on every voter.
func TestDerivedQuorumID(t *testing.T) {
	voters := []Voter{{NodeID: 1, Addr: "ctrl1:9093"}, {NodeID: 2, Addr: "ctrl2:9093"}, {NodeID: 3, Addr: "ctrl3:9093"}}
	want := quorumIDOf(voters)
	// bootstrapEntry is the entry Open wrote on node self, bound at
	// bound: its own address as bound, the others' from the list.
	bootstrapEntry := func(self int32, bound string, list []Voter) *raft.Log {
		servers := []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(self))), Address: raft.ServerAddress(bound)}}
		for _, v := range list {
			if v.NodeID != self {
				servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(strconv.Itoa(int(v.NodeID))), Address: raft.ServerAddress(v.Addr)})
			}
		}
		return &raft.Log{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(raft.Configuration{Servers: servers})}
	}
	// Every voter, each bound at an address other than its entry (a
	// container's), derives the id a new bootstrap with the list has.
	for _, v := range voters {
		bound := fmt.Sprintf("172.18.0.%d:9093", v.NodeID)
		if got := derivedQuorumID(bootstrapEntry(v.NodeID, bound, voters), v.NodeID, voters); got != want {
			t.Errorf("voter %d derived %s, want %s", v.NodeID, got, want)
		}
	}
	one := bootstrapEntry(1, "127.0.0.1:9093", nil)
	if got, want := derivedQuorumID(one, 1, nil), quorumIDOf(bootstrapVoters(nil, 1, "127.0.0.1:9093")); got != want {
		t.Errorf("a cluster of one derived %s, want %s", got, want)
	}
	// A list that leaves this node's own address empty (Config allows
	// it): the address it bound, as at bootstrap.
	blank := []Voter{{NodeID: 1}, voters[1], voters[2]}
	if got, want := derivedQuorumID(bootstrapEntry(1, "127.0.0.1:9093", blank), 1, blank), quorumIDOf(bootstrapVoters(blank, 1, "127.0.0.1:9093")); got != want || got == quorumIDOf(blank) {
		t.Errorf("own address left empty: derived %s, want %s (not %s)", got, want, quorumIDOf(blank))
	}
	withNonvoter := bootstrapEntry(1, "ctrl1:9093", voters)
	cfg := raft.DecodeConfiguration(withNonvoter.Data)
	cfg.Servers[2].Suffrage = raft.Nonvoter
	withNonvoter.Data = raft.EncodeConfiguration(cfg)
	moved := append([]Voter{}, voters...)
	moved[2].Addr = "ctrl3-new:9093"
	for _, tc := range []struct {
		name   string
		first  *raft.Log
		self   int32
		voters []Voter
	}{
		{"no entry at index 1 (a snapshot truncated it)", nil, 1, voters},
		{"an entry at index 2", &raft.Log{Index: 2, Type: raft.LogConfiguration, Data: one.Data}, 1, nil},
		{"a command at index 1", &raft.Log{Index: 1, Type: raft.LogCommand, Data: one.Data}, 1, nil},
		{"damaged configuration", &raft.Log{Index: 1, Type: raft.LogConfiguration, Data: []byte{0xc1, 0xff, 0x00}}, 1, nil},
		{"another voter's address changed since", bootstrapEntry(1, "ctrl1:9093", voters), 1, moved},
		{"a voter added to the list since", bootstrapEntry(1, "ctrl1:9093", voters[:2]), 1, voters},
		{"a voter taken from the list since", bootstrapEntry(1, "ctrl1:9093", voters), 1, voters[:2]},
		{"no list, a log of three", bootstrapEntry(1, "ctrl1:9093", voters), 1, nil},
		{"no list, another node's log of one", one, 2, nil},
		{"a nonvoter in the entry", withNonvoter, 1, voters},
		// An observer's first entry is the leader's, whose own address is
		// as the leader bound it: told only when that is its entry.
		{"an observer, the leader bound elsewhere", bootstrapEntry(1, "172.18.0.1:9093", voters), 4, voters},
	} {
		if got := derivedQuorumID(tc.first, tc.self, tc.voters); got.known() {
			t.Errorf("%s: derived %s, want unknown", tc.name, got)
		}
	}
	if got := derivedQuorumID(bootstrapEntry(1, "ctrl1:9093", voters), 4, voters); got != want {
		t.Errorf("an observer whose leader bound its entry's address derived %s, want %s", got, want)
	}
}

// refusalLog: the first refusal of a key is logged, the rest within
// refusalLogInterval counted, the next after it logged with the count;
// keys are independent, and the map stays bounded.
func TestRefusalLog(t *testing.T) {
	var r refusalLog
	t0 := time.Unix(1000, 0)
	step := func(key string, at time.Duration, wantLog bool, wantSuppressed int) {
		t.Helper()
		log, suppressed := r.note(key, t0.Add(at))
		if log != wantLog || suppressed != wantSuppressed {
			t.Fatalf("note(%s, +%v) = %v, %d; want %v, %d", key, at, log, suppressed, wantLog, wantSuppressed)
		}
	}
	step("a", 0, true, 0)
	step("a", time.Second, false, 0)
	step("b", time.Second, true, 0)
	step("a", refusalLogInterval-time.Nanosecond, false, 0)
	step("a", refusalLogInterval, true, 2)
	step("a", refusalLogInterval+time.Second, false, 0)
	for i := range 3 * maxRefusalKeys {
		r.note(strconv.Itoa(i), t0.Add(2*refusalLogInterval))
		if len(r.last) > maxRefusalKeys {
			t.Fatalf("%d keys kept, bound %d", len(r.last), maxRefusalKeys)
		}
	}
}
