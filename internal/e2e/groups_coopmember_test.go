package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A member of TestGroupCooperativeSticky's group. The same code runs in
// the test process (members that join late or leave) and in a child
// process (the member that is SIGKILLed: a member killed inside the test
// process could not be killed without the test, and closing its client
// would leave the group, which is what the kill must not do).
//
// The member logs every step as a coopEvent, in the order it happens:
// partitions assigned, records consumed, commits sent and acknowledged,
// partitions revoked. The log is what the test checks, so the member
// writes a record to the log before it counts the record as processed,
// and commits only processed records: a record the log does not show was
// never committed, whatever the member had fetched when it died.
//
// BlockRebalanceOnPoll keeps the callbacks and the processing of a poll
// apart, as Sarama and the Java consumer do: a revoke callback sees every
// record the member consumed from a revoked partition, commits it, and no
// record of that partition is consumed after it. Without it a poll could
// be processed after its partitions were revoked, and the log would show
// two members consuming a partition at once.

// coopMemberEnv names the environment variable that turns the test binary
// into a group member: its value is the member's coopMemberConfig as
// JSON. The member writes its events to stdout as JSON lines and exits
// when stdin reaches end of file (the test closed it, or died).
const coopMemberEnv = "FJORD_E2E_COOP_MEMBER"

func init() {
	// init runs before TestMain, so the child never starts the tests of
	// the binary it is a copy of.
	if cfg := os.Getenv(coopMemberEnv); cfg != "" {
		os.Exit(coopMemberMain(cfg))
	}
}

// coopMemberConfig is what one member is told.
type coopMemberConfig struct {
	Name           string
	Brokers        string
	Group, Topic   string
	SessionTimeout time.Duration
	// CommitInterval is how long the member goes between commits of what
	// it processed, besides the commit in every revoke.
	CommitInterval time.Duration
}

// Kinds of coopEvent.
const (
	evAssigned     = "assigned"      // Partitions added by a rebalance (possibly none)
	evRevoked      = "revoked"       // Partitions revoked, after the revoke's commit returned
	evLost         = "lost"          // Partitions lost without a chance to commit
	evCommitSent   = "commit-sent"   // Offsets about to be committed
	evCommitAcked  = "commit-acked"  // Offsets the node accepted
	evCommitFailed = "commit-failed" // Err: why the commit or some partitions of it failed
	evConsumed     = "consumed"      // Partition, Offset, Key, Value: one record processed
	evFailed       = "failed"        // Err: the member cannot go on
)

// coopEvent is one line of a member's log.
type coopEvent struct {
	Kind string    `json:"k"`
	At   time.Time `json:"t"`

	Partitions []int32         `json:"ps,omitempty"`
	Offsets    map[int32]int64 `json:"os,omitempty"`
	Partition  int32           `json:"p,omitempty"`
	Offset     int64           `json:"o,omitempty"`
	Key        string          `json:"key,omitempty"`
	Value      string          `json:"val,omitempty"`
	MemberID   string          `json:"mid,omitempty"`
	Generation int32           `json:"gen,omitempty"`
	Err        string          `json:"err,omitempty"`
}

// now is the wall clock without Go's monotonic reading: events from the
// child process carry wall-clock times only, and comparisons between
// times with and without one use the wall clock, so every event is
// stamped the same way.
func now() time.Time { return time.Now().Round(0) }

// runCoopMember runs one member until ctx ends, then closes its client,
// which commits and leaves. It passes every event to emit, from one
// goroutine at a time; emit must have logged the events when it returns.
// It returns an error if the member could not go on.
func runCoopMember(ctx context.Context, cfg coopMemberConfig, logger kgo.Logger, emit func(...coopEvent)) error {
	var mu sync.Mutex // guards processed and acked; the callbacks run on franz-go's goroutines
	// processed is, per partition currently assigned, the offset after the
	// last record logged as consumed: what a commit commits.
	processed := make(map[int32]kgo.EpochOffset)
	// acked is the last offset the node accepted per partition, so an
	// idle member does not commit the same offsets again.
	acked := make(map[int32]int64)

	var cl *kgo.Client
	groupMeta := func(kind string, parts map[string][]int32) coopEvent {
		memberID, gen := cl.GroupMetadata()
		ps := slices.Clone(parts[cfg.Topic])
		slices.Sort(ps)
		return coopEvent{Kind: kind, At: now(), Partitions: ps, MemberID: memberID, Generation: gen}
	}
	// commitMu makes a commit's snapshot of processed and its request one
	// step, and a revoke's commit and forgetting of its partitions
	// another: a periodic commit that read processed before a revoke
	// must not be sent after the revoke's own commit, rewinding the
	// offset of a partition that has moved on to another member.
	var commitMu sync.Mutex
	// commitLocked commits what was processed and not yet committed, and
	// waits for the answer.
	//
	// REQUIRES: commitMu held.
	commitLocked := func(ctx context.Context) {
		mu.Lock()
		offsets := make(map[int32]kgo.EpochOffset)
		for p, eo := range processed {
			if a, ok := acked[p]; !ok || a != eo.Offset {
				offsets[p] = eo
			}
		}
		mu.Unlock()
		if len(offsets) == 0 {
			return
		}
		plain := make(map[int32]int64, len(offsets))
		for p, eo := range offsets {
			plain[p] = eo.Offset
		}
		emit(coopEvent{Kind: evCommitSent, At: now(), Offsets: plain})
		cl.CommitOffsetsSync(ctx, map[string]map[int32]kgo.EpochOffset{cfg.Topic: offsets},
			func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
				at := now()
				if err != nil {
					emit(coopEvent{Kind: evCommitFailed, At: at, Offsets: plain, Err: err.Error()})
					return
				}
				ok := make(map[int32]int64)
				var errs []error
				for _, t := range resp.Topics {
					for _, p := range t.Partitions {
						if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
							errs = append(errs, fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err))
							continue
						}
						ok[p.Partition] = plain[p.Partition]
					}
				}
				if len(ok) > 0 {
					emit(coopEvent{Kind: evCommitAcked, At: at, Offsets: ok})
				}
				mu.Lock()
				maps.Copy(acked, ok)
				mu.Unlock()
				if len(errs) > 0 {
					emit(coopEvent{Kind: evCommitFailed, At: at, Offsets: plain, Err: errors.Join(errs...).Error()})
				}
			})
	}
	// forgetLocked drops revoked or lost partitions.
	//
	// REQUIRES: commitMu held.
	forgetLocked := func(parts []int32) {
		mu.Lock()
		defer mu.Unlock()
		for _, p := range parts {
			delete(processed, p)
			delete(acked, p)
		}
	}

	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers),
		kgo.ClientID("fjord-e2e-" + cfg.Name),
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(cfg.Topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(cfg.SessionTimeout),
		// A member learns of a rebalance from its next heartbeat: the
		// default of 3 s would make every rebalance take seconds.
		kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.FetchMaxWait(500 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			ev := groupMeta(evAssigned, parts)
			mu.Lock()
			for _, p := range ev.Partitions {
				// The position is unknown until a record is consumed:
				// nothing to commit for it yet.
				delete(processed, p)
			}
			mu.Unlock()
			emit(ev)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, parts map[string][]int32) {
			commitMu.Lock()
			defer commitMu.Unlock()
			commitLocked(ctx)
			ev := groupMeta(evRevoked, parts)
			forgetLocked(ev.Partitions)
			emit(ev)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			commitMu.Lock()
			defer commitMu.Unlock()
			ev := groupMeta(evLost, parts)
			forgetLocked(ev.Partitions)
			emit(ev)
		}),
	}
	if logger != nil {
		opts = append(opts, kgo.WithLogger(logger))
	}
	var err error
	cl, err = kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	// Close revokes everything (the revoke callback commits) and leaves.
	defer cl.Close()

	// Periodic commits run beside the poll loop, not in it: franz-go
	// holds commits while the member is joining and syncing, and a poll
	// loop waiting on a commit would stop consuming its unmoved
	// partitions for the whole join, which is the pause the test
	// measures.
	stopCommits := make(chan struct{})
	commitsDone := make(chan struct{})
	go func() {
		defer close(commitsDone)
		tick := time.NewTicker(cfg.CommitInterval)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				// Not canceled when the member stops: a commit whose
				// answer is lost may or may not have been applied,
				// and the checks need to know.
				commitMu.Lock()
				commitLocked(context.Background())
				commitMu.Unlock()
			case <-stopCommits:
				return
			}
		}
	}()
	// Stopped before the deferred Close, whose revoke makes the last
	// commit.
	defer func() {
		close(stopCommits)
		<-commitsDone
	}()

	for {
		fetches := cl.PollFetches(ctx)
		var failure error
		fetches.EachError(func(topic string, p int32, err error) {
			if ctx.Err() == nil && failure == nil {
				failure = fmt.Errorf("fetching %s-%d: %w", topic, p, err)
			}
		})
		if failure != nil {
			cl.AllowRebalance()
			return failure
		}
		var evs []coopEvent
		at := now()
		fetches.EachRecord(func(r *kgo.Record) {
			evs = append(evs, coopEvent{Kind: evConsumed, At: at, Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
		})
		if len(evs) > 0 {
			// Logged first, then processed: see the type's comment.
			emit(evs...)
			mu.Lock()
			fetches.EachRecord(func(r *kgo.Record) {
				processed[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			})
			mu.Unlock()
		}
		cl.AllowRebalance()
		if ctx.Err() != nil {
			return nil
		}
	}
}

// coopMemberMain is the child process's main: run the member until stdin
// ends, writing events to stdout.
func coopMemberMain(rawConfig string) int {
	var cfg coopMemberConfig
	if err := json.Unmarshal([]byte(rawConfig), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", coopMemberEnv, err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		// The test never writes; end of file means it is done with us or
		// gone, and a member must not outlive its test.
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	var mu sync.Mutex
	out := os.Stdout
	emit := func(evs ...coopEvent) {
		var buf []byte
		for _, ev := range evs {
			line, err := json.Marshal(ev)
			if err != nil {
				panic(err)
			}
			buf = append(append(buf, line...), '\n')
		}
		mu.Lock()
		defer mu.Unlock()
		// One write per batch, unbuffered: what a SIGKILL leaves in the
		// pipe is every event the member logged, plus at most one torn
		// line at the end, which the reader drops.
		if _, err := out.Write(buf); err != nil {
			os.Exit(3) // the test is gone
		}
	}
	logger := kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, func() string { return time.Now().Format("15:04:05.000 ") })
	if err := runCoopMember(ctx, cfg, logger, emit); err != nil {
		emit(coopEvent{Kind: evFailed, At: now(), Err: err.Error()})
		return 1
	}
	return 0
}

// coopProcess is a member running in a child process.
type coopProcess struct {
	cmd    *exec.Cmd
	stdin  io.Closer
	stderr *watchWriter
	done   chan struct{} // closed once stdout reached EOF and the process was waited for
	err    error         // cmd.Wait's result; read after done
}

// startCoopProcess runs a member in a child process (this test binary
// again, in the mode coopMemberEnv selects), feeding its events to log.
// The child is killed at the end of the test if still running.
func startCoopProcess(t *testing.T, cfg coopMemberConfig, log *coopLog) *coopProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), coopMemberEnv+"="+string(raw))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &coopProcess{cmd: cmd, stdin: stdin, stderr: &watchWriter{onMatch: func() {}}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting member %s: %v", cfg.Name, err)
	}
	go func() {
		defer close(p.done)
		r := bufio.NewReaderSize(stdout, 64<<10)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				// A line without its newline was torn by the kill:
				// the member had not finished logging it.
				break
			}
			var ev coopEvent
			if err := json.Unmarshal(line, &ev); err != nil {
				log.add(coopEvent{Kind: evFailed, At: now(), Err: fmt.Sprintf("unreadable line from the child: %v: %q", err, line)})
				continue
			}
			log.add(ev)
		}
		p.err = cmd.Wait()
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("member %s (child process) stderr:\n%s", cfg.Name, p.stderr.String())
		}
	})
	return p
}

// kill SIGKILLs the child and waits until everything it wrote has been
// read. Killing a child that already exited is harmless.
func (p *coopProcess) kill() {
	p.cmd.Process.Kill()
	<-p.done
	p.stdin.Close()
}

// exited reports whether the child has exited (by itself, unless kill
// was called).
func (p *coopProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// coopInProcess is a member running in the test process.
type coopInProcess struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func startCoopInProcess(t *testing.T, cfg coopMemberConfig, log *coopLog) *coopInProcess {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	m := &coopInProcess{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := runCoopMember(ctx, cfg, nil, log.add); err != nil {
			log.add(coopEvent{Kind: evFailed, At: now(), Err: err.Error()})
		}
	}()
	t.Cleanup(m.stop)
	return m
}

// stop ends the member's polling and closes its client: the revoke
// callback commits what it processed, then it leaves the group. It
// returns when the client is closed.
func (m *coopInProcess) stop() {
	m.cancel()
	<-m.done
}

// coopLog is one member's events, as the test receives them, and what
// the test derives from them while the scenario runs.
type coopLog struct {
	name string

	mu struct {
		sync.Mutex
		events []coopEvent
		// owned is the member's assignment by its callbacks.
		owned map[int32]bool
		// consumedTo is, per partition, the offset after the last record
		// consumed.
		consumedTo map[int32]int64
		// lastAcked is when a commit was last acknowledged.
		lastAcked time.Time
		// ackedTo is, per partition, the offset the node last
		// acknowledged a commit of.
		ackedTo map[int32]int64
		// lastChange is when the assignment last changed.
		lastChange time.Time
		failures   []string
		// commitFailures are the commits the node refused or did not
		// answer.
		commitFailures []string
		// gone: the member was killed or closed; its assignment no
		// longer counts.
		gone bool
	}
}

func newCoopLog(name string) *coopLog {
	l := &coopLog{name: name}
	l.mu.owned = make(map[int32]bool)
	l.mu.consumedTo = make(map[int32]int64)
	l.mu.ackedTo = make(map[int32]int64)
	return l
}

// add appends events in the order the member logged them.
func (l *coopLog) add(evs ...coopEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ev := range evs {
		l.mu.events = append(l.mu.events, ev)
		switch ev.Kind {
		case evAssigned:
			for _, p := range ev.Partitions {
				l.mu.owned[p] = true
			}
			l.mu.lastChange = ev.At
		case evRevoked, evLost:
			for _, p := range ev.Partitions {
				delete(l.mu.owned, p)
			}
			l.mu.lastChange = ev.At
		case evConsumed:
			l.mu.consumedTo[ev.Partition] = ev.Offset + 1
		case evCommitAcked:
			l.mu.lastAcked = ev.At
			maps.Copy(l.mu.ackedTo, ev.Offsets)
		case evFailed:
			l.mu.failures = append(l.mu.failures, ev.Err)
		case evCommitFailed:
			l.mu.commitFailures = append(l.mu.commitFailures, fmt.Sprintf("%v: %s", ev.Offsets, ev.Err))
		}
	}
}

// markGone takes the member out of the assignment checks.
func (l *coopLog) markGone() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.gone = true
}

func (l *coopLog) gone() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.gone
}

func (l *coopLog) failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.failures)
}

func (l *coopLog) commitFailures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.commitFailures)
}

func (l *coopLog) owned() map[int32]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.mu.owned)
}

func (l *coopLog) lastAcked() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.lastAcked
}

// uncommitted is how many records of its current partitions the member
// consumed beyond its last acknowledged commits.
func (l *coopLog) uncommitted() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for p := range l.mu.owned {
		if c, ok := l.mu.consumedTo[p]; ok {
			n += c - max(l.mu.ackedTo[p], 0)
		}
	}
	return n
}

func (l *coopLog) consumedTo() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.mu.consumedTo)
}

func (l *coopLog) events() []coopEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.mu.events)
}

// latestMemberID is the member id of the member's latest assignment.
func (l *coopLog) latestMemberID() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.mu.events) - 1; i >= 0; i-- {
		if ev := l.mu.events[i]; ev.Kind == evAssigned {
			return ev.MemberID
		}
	}
	return ""
}
