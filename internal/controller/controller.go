package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/fjordmq/fjord/internal/clock"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// Defaults for Config's zero values.
const (
	// DefaultSnapshotThreshold and DefaultSnapshotInterval are raft's:
	// snapshot when this many entries were applied since the last one,
	// checked this often.
	DefaultSnapshotThreshold = 8192
	DefaultSnapshotInterval  = 2 * time.Minute
	// DefaultTrailingLogs is how many entries stay in the log behind a
	// snapshot (raft's default is 10240; metadata entries are few and a
	// single node has no follower to catch up from them).
	DefaultTrailingLogs = 1024
)

// The controller is the local implementation of the broker side's seam.
var (
	_ controlplane.Client = (*Controller)(nil)
	_ controlplane.Images = (*Controller)(nil)
	_ controlplane.Quorum = (*Controller)(nil)
)

// Config configures a controller.
type Config struct {
	NodeID int32
	// BootstrapRecords are committed with the cluster id when this node
	// is the first active controller of a new metadata log, and never
	// otherwise (Kafka's kafka-storage format --add-scram): the SCRAM
	// credentials of the inter-broker user, say. A node that is not
	// first has them ignored; give every voter the same.
	BootstrapRecords []metadata.Record
	// Dir holds the Raft state: raft.db (raft-boltdb/v2: log and stable
	// store), snapshots/ and quorum.id (quorumid.go).
	Dir string
	// Addr is the Raft TCP bind address (--controller-addr). Its host must
	// be a concrete address (it is also what the node advertises to other
	// voters); port 0 picks a free port.
	Addr string
	// TLS secures the controller port (Raft and join requests) with
	// mutual TLS, both accepting and dialing (transport_tls.go). Nil:
	// plaintext TCP. Every voter and observer of a quorum must agree.
	TLS *TransportTLS
	// NumPartitions is num.partitions, the partition count of a topic
	// created with -1 (and by auto-create); <= 0 means 1.
	NumPartitions int32
	// ReplicationFactor is default.replication.factor, the replication
	// factor of a topic created with -1 (and by auto-create), capped at
	// the registered brokers; <= 0 means DefaultReplicationFactor.
	ReplicationFactor int16
	// Voters is the quorum a new metadata log is bootstrapped with
	// (Kafka's controller.quorum.voters); it must name this node, whose
	// entry's address is taken from Addr as bound. Empty: this node
	// alone, a cluster of one. Once the Raft state exists it is ignored:
	// the quorum is what the log says. The list as given, this node's
	// entry included (when not empty), is also what the quorum id hashes
	// (quorumid.go), so every voter must be given the same list.
	Voters []Voter
	// Observer makes this node follow the metadata log without a vote
	// (a broker-only node, --process-roles broker; join.go): it
	// bootstraps nothing and asks Voters, which must not name it, to add
	// it. It never becomes the active controller.
	Observer bool
	// SnapshotThreshold, SnapshotInterval, TrailingLogs: see the Default
	// constants (0 takes the default).
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
	// TopicConfigs is every topic config the node knows, as node
	// assembles it from the owners' definitions (storage's log settings,
	// replica's min.insync.replicas, metadata.KafkaTopicConfigs). The
	// images are built over it (metadata.Empty), so it is what
	// CreateTopics and AlterConfigs are validated with. Required.
	TopicConfigs *topicconfig.Table
	// BrokerSessionTimeout is broker.session.timeout.ms (0:
	// DefaultBrokerSessionTimeout; see sessions.go).
	BrokerSessionTimeout time.Duration
	// LeaderImbalanceCheckInterval is how often the active controller
	// checks the balance of leaderships and elects preferred leaders
	// (elect.go; Kafka's leader.imbalance.check.interval.seconds, with
	// auto.leader.rebalance.enable). 0: never.
	LeaderImbalanceCheckInterval time.Duration
	// LeaderImbalancePerBrokerPercentage is the share (percent) of the
	// partitions a broker is the preferred leader of that it may not
	// lead before the check elects them back (Kafka's
	// leader.imbalance.per.broker.percentage).
	LeaderImbalancePerBrokerPercentage int
	// ReplicaLogs asks brokers how far their replicas reach, for unclean
	// leader elections (unclean.go); nil: there are none, whatever the
	// topics say.
	ReplicaLogs ReplicaLogs
	// Clock times broker sessions; nil is clock.Real().
	Clock clock.Clock
	// Logger receives the controller's logs and raft's warnings and
	// errors; nil discards them.
	Logger *slog.Logger
}

// Voter is one member of the controller quorum.
type Voter struct {
	NodeID int32
	Addr   string // host:port the other voters dial
}

// Raft timing: a follower that has not heard from the leader for a
// random 1-2x HeartbeatTimeout stands for election, so a dead
// controller is replaced within about half a second (the leader
// heartbeats every tenth of it, 25 ms), and failover of a partition
// whose leader died with the controller stays under a second (section
// 20 of DESIGN.md). A leader that cannot reach a quorum for
// LeaderLeaseTimeout steps down.
const (
	heartbeatTimeout   = 250 * time.Millisecond
	electionTimeout    = 250 * time.Millisecond
	leaderLeaseTimeout = 125 * time.Millisecond
)

// Controller runs this node's Raft voter and owns the metadata image. See
// the package doc for threads and the lock order.
type Controller struct {
	cfg   Config
	clock clock.Clock
	log   *slog.Logger
	raft  *raft.Raft
	store *raftboltdb.BoltStore
	snaps *raft.FileSnapshotStore
	trans *raft.NetworkTransport
	mux   *muxLayer // trans's stream layer, which also takes join requests
	fsm   *fsm
	pub   *publisher

	// active is this node's active controller while it leads the
	// metadata log (active.go), nil otherwise. Only the leadership
	// goroutine stores it.
	active atomic.Pointer[activeController]
	// activations counts the terms this node has been the active
	// controller in.
	activations atomic.Int64
	// stats counts what this node decided as the active controller
	// (FenceStats).
	stats struct {
		fencings, unfencings, elections, leaderless, uncleanElections atomic.Int64
		controlledShutdowns                                           atomic.Int64
		preferredElections                                            atomic.Int64
		offlineReplicas                                               atomic.Int64
	}
	// failovers times the fences of lapsed sessions (failover.go).
	failovers failoverTimes
	// peerObserver hears Raft's failed heartbeats to other voters
	// (watchPeers).
	peerObserver *raft.Observer
	// leaders is the Raft leader this node last saw and the one before
	// it (-1: none yet): a new active controller's predecessor
	// (sessions.unreachable) is the one before itself.
	leaders struct {
		sync.Mutex
		current, previous int32
		// lost: Raft reported no leader since current was seen, so
		// current seen again is a new term of it.
		lost bool
	}
	// closing is closed by Close; watchDone when the leadership goroutine
	// has returned.
	closing, watchDone chan struct{}
	// joins is an observer's joinQuorum.
	joins sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// Open opens (or, on first start, bootstraps as a cluster of one voter)
// the controller's quorum member in cfg.Dir and returns: it never waits
// for an election. The node becomes the active controller whenever Raft
// makes it leader (active.go); until then, and on every node that does
// not lead, changes answer NOT_CONTROLLER, which callers retry. The first
// active controller of a new metadata log commits a random cluster id.
// ctx bounds nothing Open waits for today; it is kept so that opening a
// quorum of several voters can be bounded without a change of signature.
func Open(ctx context.Context, cfg Config) (_ *Controller, err error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controller: %w", context.Cause(ctx))
	}
	if err := cfg.check(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "controller")
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}

	c := &Controller{cfg: cfg, log: log, clock: cfg.Clock, pub: newPublisher(metadata.Empty(cfg.TopicConfigs)),
		closing: make(chan struct{}), watchDone: make(chan struct{})}
	c.leaders.current, c.leaders.previous = -1, -1
	c.fsm = newFSM(log, c.pub, cfg.TopicConfigs)
	defer func() {
		if err != nil {
			c.Close()
		}
	}()

	rlog := newRaftLogger(log)
	c.store, err = raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(cfg.Dir, "raft.db"),
		// bbolt waits forever for its file lock by default; a second
		// process on the same directory must fail, not hang.
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if err != nil {
		return nil, fmt.Errorf("controller: opening %s: %w", filepath.Join(cfg.Dir, "raft.db"), err)
	}
	c.snaps, err = raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, rlog)
	if err != nil {
		return nil, fmt.Errorf("controller: snapshot store in %s: %w", cfg.Dir, err)
	}
	c.mux, c.trans, err = newTransport(cfg.Addr, cfg.TLS, log, rlog)
	if err != nil {
		return nil, fmt.Errorf("controller: raft transport on %s (needs a concrete host, e.g. 127.0.0.1:9093): %w", cfg.Addr, err)
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(strconv.Itoa(int(cfg.NodeID)))
	rc.Logger = rlog
	rc.HeartbeatTimeout = heartbeatTimeout
	rc.ElectionTimeout = electionTimeout
	rc.LeaderLeaseTimeout = leaderLeaseTimeout
	rc.SnapshotThreshold = orDefault(cfg.SnapshotThreshold, DefaultSnapshotThreshold)
	rc.SnapshotInterval = orDefault(cfg.SnapshotInterval, DefaultSnapshotInterval)
	rc.TrailingLogs = orDefault(cfg.TrailingLogs, DefaultTrailingLogs)
	if err := raft.ValidateConfig(rc); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}

	existing, err := raft.HasExistingState(c.store, c.store, c.snaps)
	if err != nil {
		return nil, fmt.Errorf("controller: reading raft state in %s: %w", cfg.Dir, err)
	}
	var bootstrapped []Voter
	if !existing && !cfg.Observer {
		servers := []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: c.trans.LocalAddr()}}
		for _, v := range cfg.Voters {
			if v.NodeID != cfg.NodeID {
				servers = append(servers, raft.Server{Suffrage: raft.Voter,
					ID: raft.ServerID(strconv.Itoa(int(v.NodeID))), Address: raft.ServerAddress(v.Addr)})
			}
		}
		if err := raft.BootstrapCluster(rc, c.store, c.store, c.snaps, c.trans, raft.Configuration{Servers: servers}); err != nil {
			return nil, fmt.Errorf("controller: bootstrapping a metadata log of %d voters: %w", len(servers), err)
		}
		bootstrapped = bootstrapVoters(cfg.Voters, cfg.NodeID, c.trans.LocalAddr())
		log.Info("bootstrapped a new metadata log", "dir", cfg.Dir, "node_id", cfg.NodeID, "voters", len(servers),
			"quorum_id", quorumIDOf(bootstrapped))
	}
	if err := c.settleQuorumID(bootstrapped); err != nil {
		return nil, err
	}
	c.raft, err = raft.NewRaft(rc, c.fsm, c.store, c.store, c.snaps, c.trans)
	if err != nil {
		return nil, fmt.Errorf("controller: starting raft: %w", err)
	}
	c.mux.setJoin(c.handleJoin)
	if !cfg.Observer {
		if err := c.checkVoter(rc.LocalID); err != nil {
			close(c.watchDone) // no leadership goroutine to wait for
			return nil, err
		}
	} else {
		c.joins.Add(1)
		go c.joinQuorum()
	}
	go c.watchLeadership()
	c.watchPeers()
	img := c.Image()
	log.Info("controller opened", "node_id", cfg.NodeID, "raft_addr", c.trans.LocalAddr(),
		"metadata_offset", img.Offset, "topics", len(img.Topics))
	return c, nil
}

func (cfg *Config) check() error {
	switch {
	case cfg.NodeID < 0:
		return fmt.Errorf("controller: node id %d (allowed: >= 0)", cfg.NodeID)
	case cfg.Dir == "":
		return errors.New("controller: no directory for the raft state")
	case cfg.Addr == "":
		return errors.New("controller: no raft address")
	case cfg.TopicConfigs == nil:
		return errors.New("controller: no topic-config table")
	}
	if len(cfg.Voters) == 0 {
		if cfg.Observer {
			return errors.New("controller: a broker-only node needs the controller quorum's voters to follow")
		}
		return nil
	}
	seen := map[int32]bool{}
	for _, v := range cfg.Voters {
		if v.NodeID < 0 || seen[v.NodeID] {
			return fmt.Errorf("controller: voter node id %d is negative or given twice", v.NodeID)
		}
		seen[v.NodeID] = true
		if _, _, err := net.SplitHostPort(v.Addr); err != nil && v.NodeID != cfg.NodeID {
			return fmt.Errorf("controller: voter %d address %q: %v", v.NodeID, v.Addr, err)
		}
	}
	switch {
	case cfg.Observer && seen[cfg.NodeID]:
		return fmt.Errorf("controller: node %d is a voter of the controller quorum, so it cannot be broker-only", cfg.NodeID)
	case !cfg.Observer && !seen[cfg.NodeID]:
		return fmt.Errorf("controller: node %d is not one of the voters", cfg.NodeID)
	}
	return nil
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// checkVoter refuses a Raft state in which this node cannot elect itself
// (a directory copied from another node): it would wait for an election
// forever.
func (c *Controller) checkVoter(id raft.ServerID) error {
	f := c.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("controller: reading raft configuration: %w", err)
	}
	var voters []raft.ServerID
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s.ID)
			if s.ID == id {
				return nil
			}
		}
	}
	return fmt.Errorf("controller: the raft state in %s has voters %v, not node %s: it belongs to another node", c.cfg.Dir, voters, id)
}

// RegisterBroker commits b, a broker's registration, to the metadata log
// (on every start of the broker: its host or port may have changed) and
// returns its broker epoch, the registration's metadata offset.
func (c *Controller) RegisterBroker(ctx context.Context, b metadata.BrokerRecord) (int64, error) {
	if b.NodeID < 0 || b.Host == "" || b.Port < 1 || b.Port > 65535 {
		return -1, fmt.Errorf("%w: broker %d endpoint %q port %d (want a node id >= 0, a host and a port 1..65535)",
			controlplane.ErrInvalidRequest, b.NodeID, b.Host, b.Port)
	}
	b.Epoch = 0 // the log's offset is the epoch
	a, img, err := c.beginChange(ctx)
	if err != nil {
		return -1, fmt.Errorf("registering broker %d: %w", b.NodeID, err)
	}
	if img.MetadataVersion < metadata.ListenersMetadataVersion {
		// A log not yet raised to named listeners: the broker is known
		// by its inter-broker endpoint alone until it registers again.
		b.Listeners = nil
	}
	defer a.proposeMu.Unlock()
	if err := c.checkDuplicateLocked(a, img, b); err != nil {
		return -1, err
	}
	recs := planRegistration(img, b)
	if err := a.proposeLocked(ctx, c, recs); err != nil {
		return -1, fmt.Errorf("registering broker %d: %w", b.NodeID, err)
	}
	if len(recs) > 1 {
		c.stats.fencings.Add(1)
		elected, leaderless := c.countElections(img, recs)
		c.log.Info("broker fenced: a new process registered in its place", "broker", b.NodeID,
			"old_broker_epoch", img.Brokers[b.NodeID].Epoch, "partitions_changed", len(recs)-1,
			"leaders_elected", elected, "partitions_without_leader", leaderless)
	}
	a.sessions.touch(b.NodeID, c.clock.Now()) // a registration starts a session
	// Still under proposeMu: no later change has applied.
	return c.fsm.applied.Load().Brokers[b.NodeID].Epoch, nil
}

// Voters is the node ids of the Raft configuration's voters, ascending
// (nil if the configuration cannot be read: Raft is shutting down).
func (c *Controller) Voters() []int32 { return c.members(raft.Voter) }

// observers is the node ids of the Raft configuration's nonvoters (the
// broker-only nodes), ascending.
func (c *Controller) observers() []int32 { return c.members(raft.Nonvoter) }

// members is the node ids of the Raft configuration's servers of one
// suffrage, ascending.
func (c *Controller) members(suffrage raft.ServerSuffrage) []int32 {
	f := c.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []int32
	for _, s := range f.Configuration().Servers {
		if id, err := strconv.ParseInt(string(s.ID), 10, 32); err == nil && s.Suffrage == suffrage {
			ids = append(ids, int32(id))
		}
	}
	slices.Sort(ids)
	return ids
}

// QuorumState describes the quorum as this node's Raft knows it.
func (c *Controller) QuorumState() controlplane.QuorumState {
	st := c.raft.Stats()
	num := func(key string) int64 {
		n, err := strconv.ParseInt(st[key], 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	q := controlplane.QuorumState{Leader: c.ControllerID(), Epoch: num("term"), HighWatermark: num("commit_index")}
	// The Raft library reports no follower's log position; the active
	// controller knows, from each node's heartbeats, how far it has
	// applied the log, which is what an operator asks of a lagging one.
	var heard func(id int32) (uint64, time.Time, bool)
	if a := c.active.Load(); a != nil {
		heard = a.sessions.applied
	}
	state := func(id int32) controlplane.VoterState {
		v := controlplane.VoterState{NodeID: id, LogEndOffset: -1}
		switch {
		case id == c.cfg.NodeID:
			v.LogEndOffset = num("last_log_index")
		case heard != nil:
			if offset, at, ok := heard(id); ok {
				v.LogEndOffset, v.LastHeard = int64(offset), at
			}
		}
		return v
	}
	for _, id := range c.Voters() {
		q.Voters = append(q.Voters, state(id))
	}
	for _, id := range c.observers() {
		q.Observers = append(q.Observers, state(id))
	}
	return q
}

// ActiveTerm is the Raft term this node is the active controller in, 0
// when it is not active. A term has one leader, so the term names one
// activation: a broker's lease granted by this node's active controller
// ends when ActiveTerm stops being that term (node/lease.go).
func (c *Controller) ActiveTerm() uint64 {
	if a := c.active.Load(); a != nil {
		return a.term
	}
	return 0
}

// TransferLeadership hands this node's Raft leadership to the most
// caught-up other voter (Raft's TimeoutNow), so a planned stop does not
// leave the quorum without a controller for an election timeout. It
// returns once the transfer finished or failed (raft.ErrNotLeader when
// this node does not lead; an error when there is no other voter or the
// chosen one did not take over within an election timeout); ctx bounds
// the wait only, the transfer itself cannot be cancelled.
//
// No change is in flight when the transfer starts, and none starts until
// it ends: a change proposed during a handover may or may not commit
// under the next leader, and the client, told NOT_CONTROLLER, retries
// it there (a CreateTopics retried that way answered
// TOPIC_ALREADY_EXISTS). Held back, the change waits for the handover
// (at most an election timeout) and then hears NOT_CONTROLLER before
// anything was proposed, or goes ahead here if the handover failed.
func (c *Controller) TransferLeadership(ctx context.Context) error {
	if a := c.active.Load(); a != nil {
		a.proposeMu.Lock()
		defer a.proposeMu.Unlock()
		if a.pending != nil {
			select {
			case <-a.pending: // a proposal that outlived its caller's ctx
			case <-ctx.Done():
				return fmt.Errorf("handing over Raft leadership: waiting for an earlier metadata change: %w", context.Cause(ctx))
			}
		}
	}
	f := c.raft.LeadershipTransfer()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("handing over Raft leadership: %w", context.Cause(ctx))
	}
}

// Activations is how many times this node has become the active
// controller since it started.
func (c *Controller) Activations() int64 { return c.activations.Load() }

// FenceStats counts the fencing decisions this node committed as the
// active controller since it started.
type FenceStats struct {
	// Fencings: brokers fenced (a lapsed session, or a new process
	// replacing one that was not fenced yet); Unfencings: brokers
	// unfenced.
	Fencings, Unfencings int64
	// Elections: partitions given a new leader by those decisions;
	// Leaderless: partitions left without one (their last ISR member
	// fenced).
	Elections, Leaderless int64
	// UncleanElections: partitions given a leader from outside their
	// ISR (unclean.leader.election.enable; unclean.go).
	UncleanElections int64
	// ControlledShutdowns: brokers put in controlled shutdown.
	ControlledShutdowns int64
	// PreferredElections: partitions whose preferred replica was made
	// leader again, by the automatic balance or on request (elect.go).
	PreferredElections int64
	// OfflineReplicas: replicas marked offline, their logs having
	// failed on their brokers (offline.go).
	OfflineReplicas int64
}

// FenceStats returns the counts of this node's fencing decisions.
func (c *Controller) FenceStats() FenceStats {
	return FenceStats{Fencings: c.stats.fencings.Load(), Unfencings: c.stats.unfencings.Load(),
		Elections: c.stats.elections.Load(), Leaderless: c.stats.leaderless.Load(),
		UncleanElections: c.stats.uncleanElections.Load(), ControlledShutdowns: c.stats.controlledShutdowns.Load(),
		PreferredElections: c.stats.preferredElections.Load(), OfflineReplicas: c.stats.offlineReplicas.Load()}
}

// countElections adds to the stats the leadership changes recs make to
// img's partitions.
func (c *Controller) countElections(img *metadata.Image, recs []metadata.Record) (elected, leaderless int) {
	for _, r := range recs {
		pr, ok := r.(metadata.PartitionRecord)
		if !ok {
			continue
		}
		t := img.TopicsByID[pr.TopicID]
		if t == nil || int(pr.Partition) >= len(t.Partitions) || pr.Leader == t.Partitions[pr.Partition].Leader {
			continue
		}
		if pr.Leader == -1 {
			leaderless++
		} else {
			elected++
		}
	}
	c.stats.elections.Add(int64(elected))
	c.stats.leaderless.Add(int64(leaderless))
	return elected, leaderless
}

// Failed is closed when this node can apply no more of the metadata log
// (an entry that does not decode here, or a metadata version newer than
// this code knows); Err then says why. The node must stop: its image
// would differ from its peers'.
func (c *Controller) Failed() <-chan struct{} { return c.fsm.failed }

// Err is why Failed was closed, nil before.
func (c *Controller) Err() error {
	if err := c.fsm.stopped.Load(); err != nil {
		return *err
	}
	return nil
}

// Addr is the address the Raft transport bound.
func (c *Controller) Addr() string { return string(c.trans.LocalAddr()) }

// Image is the latest image published on this node: every subscriber has
// seen it. Never nil.
func (c *Controller) Image() *metadata.Image { return c.pub.published.Load() }

// ControllerID is the node id of the active controller (the Raft leader),
// -1 if there is none.
func (c *Controller) ControllerID() int32 {
	_, id := c.raft.LeaderWithID()
	n, err := strconv.ParseInt(string(id), 10, 32)
	if id == "" || err != nil {
		return -1
	}
	return int32(n)
}

// Subscribe calls fn with the current image at once and then with every
// new image, in order, from one publisher goroutine. fn must not block
// long: a proposal returns only after every subscriber has seen its image,
// so fn must not propose (CreateTopics, ...) or call Subscribe. After
// cancel returns fn is not called again, except for a call already under
// way.
func (c *Controller) Subscribe(fn func(*metadata.Image)) (cancel func()) {
	return c.pub.subscribe(fn)
}

// AwaitImage returns once every subscriber has seen the image of
// metadata offset and Image returns it (or a later one), or ctx ends
// (controlplane.ErrTimedOut), or the controller closes first
// (controlplane.ErrNotController).
func (c *Controller) AwaitImage(ctx context.Context, offset uint64) error {
	return c.pub.waitPublished(ctx, offset)
}

// Close stops Raft, delivers the images already applied, and closes the
// Raft stores. Proposals under way fail with controlplane.ErrNotController.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		close(c.closing)
		c.joins.Wait()
		var errs []error
		if c.raft != nil {
			errs = append(errs, c.raft.Shutdown().Error())
			<-c.watchDone
			if c.peerObserver != nil {
				c.raft.DeregisterObserver(c.peerObserver)
			}
		}
		if c.trans != nil {
			// Close stops the listener only: the pooled connections to
			// the other voters stay open (and their handlers on the other
			// side blocked reading) until closed here.
			c.trans.CloseStreams()
			errs = append(errs, c.trans.Close())
		}
		c.pub.close()
		if c.store != nil {
			errs = append(errs, c.store.Close())
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// SnapshotNow snapshots the image and truncates the Raft log behind it
// (keeping TrailingLogs entries). Nothing new since the last snapshot is
// not an error.
func (c *Controller) SnapshotNow() error {
	err := c.raft.Snapshot().Error()
	if errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil
	}
	return err
}

// RaftStats describes the Raft log on disk.
type RaftStats struct {
	FirstIndex, LastIndex uint64 // entries in raft.db: [FirstIndex, LastIndex]
	SnapshotIndex         uint64 // index of the newest snapshot, 0 if none
	AppliedIndex          uint64
}

// RaftStats reports the Raft log's extent, showing truncation after a
// snapshot.
func (c *Controller) RaftStats() (RaftStats, error) {
	var s RaftStats
	var err error
	if s.FirstIndex, err = c.store.FirstIndex(); err != nil {
		return s, err
	}
	if s.LastIndex, err = c.store.LastIndex(); err != nil {
		return s, err
	}
	metas, err := c.snaps.List()
	if err != nil {
		return s, err
	}
	if len(metas) > 0 {
		s.SnapshotIndex = metas[0].Index // newest first
	}
	s.AppliedIndex = c.raft.AppliedIndex()
	return s, nil
}

// raftError maps hashicorp/raft's errors to Kafka's.
func raftError(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipLost),
		errors.Is(err, raft.ErrRaftShutdown), errors.Is(err, raft.ErrLeadershipTransferInProgress),
		errors.Is(err, raft.ErrAbortedByRestore):
		return fmt.Errorf("%w: %w", controlplane.ErrNotController, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", controlplane.ErrTimedOut, err)
	}
	return fmt.Errorf("controller: metadata log: %w", err)
}

// timeoutOf is what is left of ctx's deadline for raft calls that take a
// timeout (0: none).
func timeoutOf(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(time.Until(d), time.Millisecond)
}

// waitFuture waits for a raft future or ctx, whichever ends first.
func waitFuture(ctx context.Context, f raft.Future) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		if err != nil {
			return raftError(err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", controlplane.ErrTimedOut, context.Cause(ctx))
	}
}

// newTransport is the quorum's TCP transport on addr, mutual TLS when
// sec is set: log receives the stream layer's refusals, rlog raft's own
// messages.
func newTransport(addr string, sec *TransportTLS, log *slog.Logger, rlog *raftLogger) (*muxLayer, *raft.NetworkTransport, error) {
	mux, err := newMuxLayer(addr, log, sec)
	if err != nil {
		return nil, nil, err
	}
	return mux, raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  mux,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  rlog,
		// One AppendEntries in flight per follower: hashicorp/raft's
		// pipelined replication (the default, two in flight) can
		// deadlock when a follower answers Success=false, as a
		// restarted one does. Its decoder stops reading, the sender
		// parks on the next send, and replication to that follower
		// stops for good while heartbeats keep it from standing for
		// election; Shutdown then waits on the parked sender forever
		// (the hang behind a SIGTERM that never exits). Synchronous
		// replication still batches everything appended meanwhile
		// into the next request, which is what the metadata log's
		// small, group-committed entries need.
		MaxRPCsInFlight: 1,
	}), nil
}
