package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/history"
	"github.com/fjordmq/fjord/internal/netfault"
)

// The faults of fjord verify. A run with faults (--local, or a user's
// --fault-cmd) draws a schedule from its seed: every --fault-interval
// one fault, dealt from the --faults mix (every kind once a round, in
// a random order), on a node drawn from the
// cluster's, held for one interval and then healed; after each heal a
// probe writes one record to every partition and reads it back, and
// the cluster must take them within --live-within. The last interval
// of the run, at least, is without faults, so the run ends on a
// healthy cluster. The same seed draws the same faults on the same
// nodes in the same order; their timing is the machine's.

// Fault kinds, as --faults and the report name them.
const (
	faultKill    = "kill"     // SIGKILL one node; the heal starts it again
	faultPause   = "pause"    // SIGSTOP one node; the heal sends SIGCONT
	faultRestart = "restart"  // SIGTERM (a controlled shutdown); the heal starts it again
	faultKillAll = "kill-all" // SIGKILL every node at once; the heal starts them all

	// The network's (--local in namespaces, or a --fault-cmd script for
	// isolate). The clients, on the host, still reach every node: what
	// is cut is the nodes' links to each other, which is what a stale
	// leader, a split quorum or a lagging follower is made of.
	faultIsolate = "isolate" // one node cut off from the others, both ways
	faultSplit   = "split"   // the nodes in two halves, a minority with the node and a majority, that cannot talk
	faultBridge  = "bridge"  // two halves that reach each other only through the node (Jepsen's bridge)
	faultCut     = "cut"     // the node's packets to one other node dropped, one way
	faultDelay   = "delay"   // the node's links to every other node slowed by faultDelayBy, both ways

	// The disk's (--local): a node SIGKILLed and its files damaged as a
	// power cut can leave them (verify_disk.go); the heal starts it
	// again.
	faultTornWrite = "torn-write" // each partition log's last write only partly on the disk
	faultBitFlip   = "bit-flip"   // one bit flipped in a batch its recovery scans
)

// allFaultKinds is every kind, in the order the report counts them.
var allFaultKinds = []string{faultKill, faultPause, faultRestart, faultKillAll, faultIsolate, faultSplit, faultBridge, faultCut, faultDelay,
	faultTornWrite, faultBitFlip}

// networkFaultKinds are the kinds --local does to its nodes' links.
var networkFaultKinds = []string{faultIsolate, faultSplit, faultBridge, faultCut, faultDelay}

// faultDelayBy is what the delay fault adds to each packet between the
// node and the others: several times a heartbeat's round trip on a LAN,
// well under the sessions' and requests' timeouts, so the cluster must
// stay live through it, only slower.
const faultDelayBy = 200 * time.Millisecond

const (
	// faultCmdTimeout bounds one call of a --fault-cmd script.
	faultCmdTimeout = 2 * time.Minute
	// maxFaultOutput is how much of a failed script's output an error
	// quotes.
	maxFaultOutput = 400
)

// faulter injects faults into one cluster.
type faulter interface {
	// kinds is what this faulter can do, with why it cannot do the rest.
	kinds() (can []string, cannot map[string]string)
	// nodes is the node ids a fault may name.
	nodes() []int
	// inject starts a fault on node (0 for kill-all), drawing whatever
	// else it needs (the other end of a cut, a split's halves) from rng,
	// and says what it did when node alone does not tell.
	inject(ctx context.Context, kind string, node int, rng *rand.Rand) (detail string, err error)
	// heal ends every fault in force and returns once the cluster's
	// nodes are all running again, saying what the nodes did about a
	// fault when that is worth knowing (recovery cutting damage).
	heal(ctx context.Context) (effect string, err error)
}

// faultEvent is one fault of a run, as the report shows it.
type faultEvent struct {
	Kind string `json:"kind"`
	Node int    `json:"node,omitempty"` // 0: every node
	// Detail says what was done when Kind and Node do not ("1 -> 3
	// dropped", "[1] | [2 3]"), and Effect what the nodes did about it
	// ("recovery cut damaged tails from 3 logs").
	Detail string `json:"detail,omitempty"`
	Effect string `json:"effect,omitempty"`
	// At and HealedAt are seconds since the run began.
	At       float64 `json:"at_s"`
	HealedAt float64 `json:"healed_at_s"`
	// LiveAfter is seconds from the heal until a probe record was
	// acknowledged and read back on every partition; -1 if it was not
	// within --live-within.
	LiveAfter float64 `json:"live_after_s"`
	// FullISRAfter is seconds from the heal until every partition's
	// in-sync replicas were all its replicas again; -1 if not within
	// --live-within (not a violation: the cluster was live, one replica
	// short).
	FullISRAfter float64 `json:"full_isr_after_s"`
	// MayLoseFrom and MayLoseWhy say, for a kill-all under
	// flush.policy=interval, from when (seconds since the run began) the
	// records acknowledged until the heal may be lost, and why.
	MayLoseFrom *float64 `json:"may_lose_from_s,omitempty"`
	MayLoseWhy  string   `json:"may_lose_why,omitempty"`
	Error       string   `json:"error,omitempty"`
	// violation is the kind of anomaly Error is: a fault or heal that
	// failed, or a cluster not live in time after the heal.
	violation string
}

func (e faultEvent) String() string {
	target := "every node"
	if e.Node != 0 {
		target = "node " + strconv.Itoa(e.Node)
	}
	if e.Detail != "" {
		target = e.Detail
	}
	s := fmt.Sprintf("%6.1fs %-8s %s, healed at %.1fs", e.At, e.Kind, target, e.HealedAt)
	if e.Effect != "" {
		s += " (" + e.Effect + ")"
	}
	if e.LiveAfter >= 0 {
		s += fmt.Sprintf(", live again %.2fs later", e.LiveAfter)
		if e.FullISRAfter >= 0 {
			s += fmt.Sprintf(", every replica in sync %.2fs later", e.FullISRAfter)
		} else {
			s += ", some replica not back in sync within --live-within"
		}
	}
	if e.MayLoseFrom != nil {
		s += fmt.Sprintf("; flush.policy=interval may lose what was acknowledged from %.1fs on (%s)", *e.MayLoseFrom, e.MayLoseWhy)
	}
	if e.Error != "" {
		s += ": " + e.Error
	}
	return s
}

// parseFaultMix reads --faults: kinds separated by commas, a kind given
// twice drawn twice as often; "none" is no faults.
func parseFaultMix(s string, f faulter) ([]string, error) {
	if strings.TrimSpace(s) == "none" {
		return nil, nil
	}
	can, cannot := f.kinds()
	var mix []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		switch {
		case slices.Contains(can, k):
			mix = append(mix, k)
		case cannot[k] != "":
			return nil, fmt.Errorf("--faults: %s %s", k, cannot[k])
		default:
			return nil, fmt.Errorf("--faults %q: %q is not a fault; want some of %s, or none", truncate(s, 64), truncate(k, 32), strings.Join(can, ","))
		}
	}
	return mix, nil
}

// faultRun is the schedule of one run and what it did.
type faultRun struct {
	f          faulter
	mix        []string
	interval   time.Duration
	liveWithin time.Duration
	rng        *rand.Rand
	start      time.Time
	progress   io.Writer
	probe      *liveProbe

	deck []string // the mix's kinds not yet drawn this round

	// checker and lossWindow: a kill-all under flush.policy=interval
	// tells the checker what may be lost (verify_policy.go); lossWindow
	// is 0 under any other policy. caughtUp is when every replica was
	// last back in sync after a heal.
	checker    *history.Checker
	lossWindow time.Duration
	caughtUp   time.Time

	mu     sync.Mutex
	events []faultEvent
}

// draw is the next fault kind: the mix is dealt in rounds, each a
// random order of all of it, so every kind in the mix is injected once
// in the first len(mix) faults.
func (r *faultRun) draw() string {
	if len(r.deck) == 0 {
		for _, i := range r.rng.Perm(len(r.mix)) {
			r.deck = append(r.deck, r.mix[i])
		}
	}
	k := r.deck[0]
	r.deck = r.deck[1:]
	return k
}

func newFaultRun(f faulter, mix []string, v verifyOptions, start time.Time, progress io.Writer, probe *liveProbe, lossWindow time.Duration) *faultRun {
	return &faultRun{f: f, mix: mix, interval: v.faultInterval, liveWithin: v.liveWithin,
		rng: rand.New(rand.NewPCG(v.seed, 0xfa17)), start: start, progress: progress, probe: probe,
		checker: probe.checker, lossWindow: lossWindow}
}

// run injects faults until the run has less than two intervals left
// (one to hold the fault, one to write on a healed cluster) or ctx
// ends, and always heals before it returns.
func (r *faultRun) run(ctx context.Context, stopAt time.Time) {
	if len(r.mix) == 0 {
		return
	}
	ids := r.f.nodes()
	for {
		if !clock.Sleep(ctx, r.interval) || time.Until(stopAt) < 2*r.interval {
			return
		}
		ev := faultEvent{Kind: r.draw(), LiveAfter: -1, FullISRAfter: -1}
		if ev.Kind != faultKillAll {
			ev.Node = ids[r.rng.IntN(len(ids))]
		}
		injected := time.Now()
		ev.At = r.since()
		var err error
		ev.Detail, err = r.f.inject(ctx, ev.Kind, ev.Node, r.rng)
		if err == nil {
			what := nodeName(ev.Node)
			if ev.Detail != "" {
				what = ev.Detail
			}
			fmt.Fprintf(r.progress, "%s: fault: %s %s\n", time.Since(r.start).Round(time.Second), ev.Kind, what)
			clock.Sleep(ctx, r.interval)
		}
		// Healed whatever happened, and on a context of its own: an
		// interrupted run still leaves every node running.
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), localReadyTimeout+faultCmdTimeout)
		healing := time.Now()
		var herr error
		ev.Effect, herr = r.f.heal(hctx)
		cancel()
		ev.HealedAt = r.since()
		if ev.Kind == faultKillAll && r.lossWindow > 0 {
			from, why := mayLoseSince(injected, r.caughtUp, r.start, r.lossWindow)
			r.checker.MayLose(from, healing, fmt.Sprintf("flush.policy=interval, every node killed at once at %.1fs: %s", ev.At, why))
			fromS := from.Sub(r.start).Seconds()
			ev.MayLoseFrom, ev.MayLoseWhy = &fromS, why
		}
		if err = errors.Join(err, herr); err == nil && ctx.Err() == nil {
			healed := time.Now()
			if perr := r.probe.run(ctx, r.liveWithin); perr != nil {
				err, ev.violation = perr, kindNotLive
			} else {
				ev.LiveAfter = time.Since(healed).Seconds()
				if r.probe.fullISR(ctx, r.liveWithin) == nil {
					ev.FullISRAfter = time.Since(healed).Seconds()
				}
			}
		}
		// Not in sync in time, or not known: taken as caught up now,
		// which only widens the next kill-all's window.
		r.caughtUp = time.Now()
		if err != nil {
			ev.Error = err.Error()
			if errors.As(err, new(damageUnnoticed)) {
				ev.violation = kindDamageUnnoticed
			}
			if ev.violation == "" {
				ev.violation = kindFaultFailed
			}
		}
		r.mu.Lock()
		r.events = append(r.events, ev)
		r.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

func (r *faultRun) since() float64 {
	return float64(time.Since(r.start).Round(100*time.Millisecond)) / float64(time.Second)
}

// report is the run's faults, their count by kind, and one anomaly for
// each that failed or after which the cluster was not live in time.
func (r *faultRun) report() (events []faultEvent, counts map[string]int, anomalies []history.Violation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	counts = map[string]int{}
	for _, ev := range r.events {
		counts[ev.Kind]++
		if ev.Error != "" {
			anomalies = append(anomalies, history.Violation{Kind: ev.violation,
				Text: fmt.Sprintf("fault %s %s at %.1fs: %s", ev.Kind, nodeName(ev.Node), ev.At, ev.Error)})
		}
	}
	return append([]faultEvent{}, r.events...), counts, anomalies
}

func nodeName(id int) string {
	if id == 0 {
		return "every node"
	}
	return "node " + strconv.Itoa(id)
}

// liveProbe is what "live again" means after a heal: one record written
// (acks=all) to every partition of the run's topic and read back, the
// records told to the checker like the workload's.
type liveProbe struct {
	seeds   []string
	v       verifyOptions
	checker *history.Checker
	n       int // probes so far, to keep values unique
	sent    int // records written, each told to the checker
}

func (p *liveProbe) run(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	p.n++
	pr, err := kgo.NewClient(verifyClient(p.seeds, "fjord-verify-probe", kgo.DialTimeout(reachTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return err
	}
	defer pr.Close()
	offsets := map[string]map[int32]kgo.Offset{}
	for _, topic := range p.v.topics {
		offsets[topic] = map[int32]kgo.Offset{}
		for part := range p.v.partitions {
			key := fmt.Appendf(nil, "probe-%d-%s-%d", p.n, topic, part)
			value := fmt.Appendf(nil, "%d-probe-%d-%s-%d", p.v.seed, p.n, topic, part)
			p.checker.SentBy("probe", topic, key, value)
			p.sent++
			rec, err := pr.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: key, Value: value, Partition: part}).First()
			if err != nil {
				return fmt.Errorf("not live within %v of the heal: a write to %s-%d: %w", within, topic, part, err)
			}
			p.checker.Acked(history.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
			offsets[topic][part] = kgo.NewOffset().At(rec.Offset)
		}
	}
	rd, err := kgo.NewClient(verifyClient(p.seeds, "fjord-verify-probe", kgo.DialTimeout(reachTimeout),
		kgo.ConsumePartitions(offsets))...)
	if err != nil {
		return err
	}
	defer rd.Close()
	left := len(p.v.topics) * int(p.v.partitions)
	for left > 0 {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("not live within %v of the heal: %d partitions' probe records not read back", within, left)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			at, waiting := offsets[rec.Topic][rec.Partition]
			// This reader reads read_uncommitted: in the txn workload
			// the records after the probe's may belong to a transaction
			// still open, later aborted, which a read_committed reader
			// must never see; so there only the probe's own record
			// counts as a read.
			if p.v.workload != workloadTxn || (waiting && rec.Offset == at.EpochOffset().Offset) {
				p.checker.Read(history.Record{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
			}
			if waiting {
				delete(offsets[rec.Topic], rec.Partition)
				left--
			}
		})
	}
	return nil
}

// fullISR waits, within within, until every partition of the run's
// topics has all its replicas in sync, as a node's Metadata answers.
func (p *liveProbe) fullISR(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cl, err := kgo.NewClient(verifyClient(p.seeds, "fjord-verify-probe", kgo.DialTimeout(reachTimeout))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return waitFullISR(ctx, cl, p.v.topics...)
}

// localFaulter is --local's: signals to the nodes' processes, and, when
// the nodes run in namespaces of their own, faults on their links.
type localFaulter struct {
	// count is --nodes, and netErr why the links cannot be faulted here
	// (nil: they can): what the kinds are is known before the cluster
	// starts.
	count  int
	netErr error

	c *localCluster // set once the cluster runs
	// topics and partitions are the run's, whose logs the disk faults
	// damage.
	topics     []string
	partitions int32
	down       map[int]bool // killed or stopped; started again at the heal
	paused     map[int]bool
	// damaged is, per node a disk fault damaged, how many of its logs
	// its recovery must find damaged when the heal starts it again.
	damaged map[int]int
}

// damageUnnoticed is a heal's error when a node started again did not
// find the damage a disk fault did to its logs: it would serve it.
type damageUnnoticed struct{ node, want, got int }

func (e damageUnnoticed) Error() string {
	return fmt.Sprintf("node %d started again and its recovery cut damage from %d of its logs, not the %d a disk fault damaged", e.node, e.got, e.want)
}

func newLocalFaulter(count int) *localFaulter {
	return &localFaulter{count: count, netErr: netfault.Available(), down: map[int]bool{}, paused: map[int]bool{}, damaged: map[int]int{}}
}

func (f *localFaulter) kinds() ([]string, map[string]string) {
	can := []string{faultKill, faultPause, faultRestart, faultKillAll, faultTornWrite, faultBitFlip}
	cannot := map[string]string{}
	for _, k := range networkFaultKinds {
		switch {
		case f.count < 2:
			cannot[k] = "needs --nodes 2 or more: a lone node has no links to fault"
		case k == faultBridge && f.count < 3:
			cannot[k] = "needs --nodes 3 or more: a bridge joins two halves"
		case f.netErr != nil:
			cannot[k] = "cannot be done here: network faults put each node in a network namespace of its own, and " + f.netErr.Error()
		default:
			can = append(can, k)
		}
	}
	return can, cannot
}

// needsNetwork reports whether mix has a fault on the links, for which
// the nodes must run in namespaces of their own.
func needsNetwork(mix []string) bool {
	return slices.ContainsFunc(mix, func(k string) bool { return slices.Contains(networkFaultKinds, k) })
}

func (f *localFaulter) nodes() []int {
	var ids []int
	for _, n := range f.c.nodes {
		ids = append(ids, n.id)
	}
	return ids
}

func (f *localFaulter) inject(ctx context.Context, kind string, id int, rng *rand.Rand) (string, error) {
	if kind == faultKillAll {
		for _, n := range f.c.nodes {
			f.kill(n)
		}
		clear(f.paused) // a stopped process dies of SIGKILL too
		return "", nil
	}
	n := f.c.nodes[id-1]
	if f.down[id] || f.paused[id] {
		return "", nil // never happens: every fault is healed before the next
	}
	switch kind {
	case faultKill:
		f.kill(n)
	case faultPause:
		if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			return "", err
		}
		f.paused[id] = true
	case faultRestart:
		f.down[id] = true
		// A controlled shutdown that hangs or fails is a finding.
		return "", n.stop(n.name(f.c))
	case faultTornWrite, faultBitFlip:
		f.kill(n)
		var detail string
		var damaged int
		var err error
		if kind == faultTornWrite {
			var others []string
			for _, o := range f.c.nodes {
				if o.id != id {
					others = append(others, o.dataDir())
				}
			}
			detail, damaged, err = tearWrites(n.dataDir(), others, f.topics, f.partitions, rng)
		} else {
			detail, damaged, err = flipBit(n.dataDir(), f.topics, f.partitions, rng)
		}
		f.damaged[id] = damaged
		return fmt.Sprintf("node %d: %s", id, detail), err
	default:
		if slices.Contains(networkFaultKinds, kind) && f.c.network != nil {
			return f.cutLinks(kind, id, rng)
		}
		return "", fmt.Errorf("fault %q: not a local fault", kind)
	}
	return "", nil
}

// cutLinks does a network fault around node id, the others drawn from
// rng, and says which links it cut.
func (f *localFaulter) cutLinks(kind string, id int, rng *rand.Rand) (string, error) {
	nw := f.c.network
	var others []int
	for _, n := range f.c.nodes {
		if n.id != id {
			others = append(others, n.id)
		}
	}
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	switch kind {
	case faultIsolate:
		return fmt.Sprintf("node %d cut off from the others", id), nw.Isolate(id)
	case faultSplit:
		// The node and as many others as leave it a minority, against
		// the rest: the minority cannot elect, the majority must go on.
		minority := append([]int{id}, others[:(len(others)+1)/2-1]...)
		majority := others[len(minority)-1:]
		slices.Sort(minority)
		slices.Sort(majority)
		return fmt.Sprintf("%v | %v", minority, majority), nw.Split(minority, majority)
	case faultBridge:
		a, b := others[:len(others)/2], others[len(others)/2:]
		slices.Sort(a)
		slices.Sort(b)
		for _, x := range a {
			for _, y := range b {
				if err := nw.CutBoth(x, y); err != nil {
					return "", err
				}
			}
		}
		return fmt.Sprintf("node %d bridges %v and %v", id, a, b), nil
	case faultCut:
		return fmt.Sprintf("%d -> %d dropped", id, others[0]), nw.Cut(id, others[0])
	case faultDelay:
		for _, o := range others {
			if err := errors.Join(nw.Delay(id, o, faultDelayBy), nw.Delay(o, id, faultDelayBy)); err != nil {
				return "", err
			}
		}
		return fmt.Sprintf("node %d's links slowed by %v both ways", id, faultDelayBy), nil
	}
	return "", fmt.Errorf("fault %q: not a network fault", kind)
}

func (f *localFaulter) kill(n *localNode) {
	if !n.exited() {
		n.cmd.Process.Kill()
		<-n.done
	}
	f.down[n.id] = true
}

func (f *localFaulter) heal(ctx context.Context) (string, error) {
	var errs []error
	if f.c.network != nil {
		if err := f.c.network.Heal(); err != nil {
			errs = append(errs, fmt.Errorf("healing the network: %w", err))
		}
	}
	for id := range f.paused {
		if err := f.c.nodes[id-1].cmd.Process.Signal(syscall.SIGCONT); err != nil {
			errs = append(errs, fmt.Errorf("resuming node %d: %w", id, err))
		}
	}
	clear(f.paused)
	var ids []int
	for id := range f.down {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	clear(f.down)
	if err := f.c.restart(ctx, ids...); err != nil {
		errs = append(errs, fmt.Errorf("starting nodes %v again: %w", ids, err))
	}
	// A node that died by itself meanwhile is not healed: it is found.
	for _, n := range f.c.nodes {
		if n.exited() {
			errs = append(errs, fmt.Errorf("%s exited by itself (%v); last lines of its log:\n%s", n.name(f.c), n.waitErr, n.logTail(10)))
		}
	}
	// Recovery logs each damaged log it cut (storage's "truncated
	// damaged log tail", at WARN, the level the nodes run at).
	var effects []string
	for id, want := range f.damaged {
		got := 0
		for line := range strings.Lines(f.c.nodes[id-1].logSinceStart()) {
			if strings.Contains(line, "truncated damaged log tail") && slices.ContainsFunc(f.topics, func(t string) bool { return strings.Contains(line, "log="+t+"-") }) {
				got++
			}
		}
		effects = append(effects, fmt.Sprintf("recovery cut damage from %d of node %d's logs", got, id))
		if got < want {
			errs = append(errs, damageUnnoticed{node: id, want: want, got: got})
		}
	}
	clear(f.damaged)
	return strings.Join(effects, "; "), errors.Join(errs...)
}

// cmdFaulter is --fault-cmd's: a user's script, run as
//
//	SCRIPT kill NODE | pause NODE | isolate NODE | heal
//
// with NODE a broker id; "heal" ends every fault in force (starts
// killed nodes again, resumes paused ones, reconnects isolated ones) and
// returns once they are running. Exit status 0 means done. kill-all is
// "kill NODE" for every node at once.
type cmdFaulter struct {
	path string
	ids  []int
}

func (f *cmdFaulter) kinds() ([]string, map[string]string) {
	cannot := map[string]string{faultRestart: "is not part of the --fault-cmd protocol (kill, pause, isolate, heal)"}
	for _, k := range []string{faultSplit, faultBridge, faultCut, faultDelay, faultTornWrite, faultBitFlip} {
		cannot[k] = "is not part of the --fault-cmd protocol (kill, pause, isolate, heal); --local does it"
	}
	return []string{faultKill, faultPause, faultIsolate, faultKillAll}, cannot
}

func (f *cmdFaulter) nodes() []int { return f.ids }

func (f *cmdFaulter) inject(ctx context.Context, kind string, id int, _ *rand.Rand) (string, error) {
	if kind != faultKillAll {
		return "", f.call(ctx, kind, strconv.Itoa(id))
	}
	errs := make([]error, len(f.ids))
	var wg sync.WaitGroup
	for i, id := range f.ids {
		wg.Go(func() { errs[i] = f.call(ctx, faultKill, strconv.Itoa(id)) })
	}
	wg.Wait()
	return "", errors.Join(errs...)
}

func (f *cmdFaulter) heal(ctx context.Context) (string, error) { return "", f.call(ctx, "heal") }

func (f *cmdFaulter) call(ctx context.Context, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, faultCmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, f.path, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("--fault-cmd %s %s: %v: %s", f.path, strings.Join(args, " "), err, truncate(strings.TrimSpace(string(out)), maxFaultOutput))
	}
	return nil
}
