package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// Issue 15, process roles: three voters and a broker-only node 4
// (--process-roles broker), which follows the metadata log without a
// vote. DescribeQuorum names it an observer; it registers, leads
// partitions and serves acks=all writes like any broker; it is never
// the controller, even when the active one stops; and stopping it, or
// SIGKILLing and restarting it, leaves the quorum committing.
func TestBrokerOnlyNode(t *testing.T) {
	c := testcluster.StartCluster(t, testcluster.ClusterOptions{Nodes: 3, BrokerOnly: 1})
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(c.Brokers(), ",")...), kgo.RetryTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	e := &env{t: t, c: c, cl: cl}
	t.Run("Observer", e.brokerOnlyObserver)
	t.Run("Reassign", e.reassignOntoObserver)
	t.Run("ReplaceVoter", e.replaceVoter)
}

// observer is TestBrokerOnlyNode's broker-only node.
const observer = 4

func (e *env) brokerOnlyObserver(t *testing.T) {
	c := e.c
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	e.quorumIs(t, ctx, []int32{1, 2, 3}, []int32{observer})
	// The line comes from the controller's own goroutine, which may log
	// it just after the quorum shows the observer.
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(c.Node(observer).LatestOutput(), "following the metadata log as an observer") {
			return errors.New("node 4's log does not say it follows the metadata log as an observer")
		}
		return nil
	})

	// Placement uses it like any broker: of twelve partitions of three
	// replicas node 4 is the preferred leader of three. (Above ten
	// partitions the load writes to each in turn.)
	const topic, partitions = "broker-only", 12
	e.createTopic(t, ctx, topic, partitions, 3)
	e.fullISRs(t, ctx, topic, partitions)
	if led := e.ledBy(t, ctx, topic, observer); led != partitions/4 {
		t.Fatalf("node 4 leads %d of %d partitions, want %d", led, partitions, partitions/4)
	}
	load := e.startLoad(t, ctx, topic, partitions)
	load.waitAcks(t, 300)

	// The active controller stops: a voter takes over, never node 4.
	ctrl := e.c.ControllerID(t)
	e.controlledStop(t, ctrl, true)
	if now := e.c.ControllerID(t); now == observer {
		t.Fatalf("the broker-only node became the active controller")
	}
	load.waitAcks(t, 300)
	e.c.Start(ctrl)
	e.fullISRs(t, ctx, topic, partitions)

	// SIGKILL of node 4 under load: its partition fails over, the
	// quorum commits a topic meanwhile (it has no vote to miss), and
	// restarted it follows the log again without asking anew.
	e.c.Kill(observer)
	load.waitAcks(t, 300)
	e.createTopic(t, ctx, "broker-only-while-down", 1, 3)
	e.c.Start(observer)
	e.fullISRs(t, ctx, topic, partitions)
	e.quorumIs(t, ctx, []int32{1, 2, 3}, []int32{observer})
	load.finish(t, ctx, e)
}

// Issue 15, acceptance point 6: a voter's disk is lost. Node 3 is
// stopped and its data directory wiped; remove-voter takes it out of
// the quorum; it comes back broker-only on the empty directory, follows
// the log as an observer, and add-voter makes it a voter again. Under an
// acks=all load and a CreateTopics every 200 ms all the while, the
// quorum keeps committing: no topic creation fails, no produce fails,
// everything acknowledged is read back.
func (e *env) replaceVoter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const replaced = 3 // if it is the active controller, its shutdown hands over
	const topic, partitions = "replace-voter", 12
	e.createTopic(t, ctx, topic, partitions, 3)
	e.fullISRs(t, ctx, topic, partitions)
	load := e.startLoad(t, ctx, topic, partitions)
	load.waitAcks(t, 300)
	creates := &rollLoad{topic: topic, brokers: e.c.Brokers()}
	createCtx, stopCreates := context.WithCancel(ctx)
	var created []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		created = creates.createTopics(t, createCtx)
	}()
	defer func() { stopCreates(); <-done }()

	n := e.c.Node(replaced)
	e.c.Stop(replaced)
	if err := os.RemoveAll(n.DataDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n.DataDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	e.fjordCLI(t, "node 3 is no longer a voter", "cluster", "remove-voter", "--node-id", "3")
	e.quorumIs(t, ctx, []int32{1, 2}, []int32{observer})

	var others []string
	for _, id := range []int32{1, 2} {
		others = append(others, fmt.Sprintf("%d@%s", id, e.c.Node(id).ControllerAddr()))
	}
	if err := n.Reconfigure(strings.Join(others, ","), []string{"--process-roles", "broker"}); err != nil {
		t.Fatal(err)
	}
	e.c.Start(replaced)
	e.quorumIs(t, ctx, []int32{1, 2}, []int32{replaced, observer})
	e.fjordCLI(t, "node 3 is a voter", "cluster", "add-voter", "--node-id", "3", "--controller-addr", n.ControllerAddr())
	e.quorumIs(t, ctx, []int32{1, 2, 3}, []int32{observer})

	e.fullISRs(t, ctx, topic, partitions) // the empty replica caught up
	load.waitAcks(t, 300)
	stopCreates()
	<-done
	if len(creates.createErrors) > 0 {
		t.Fatalf("%d CreateTopics failed while the voter was replaced: %v", len(creates.createErrors), errors.Join(creates.createErrors...))
	}
	if len(created) == 0 {
		t.Fatal("no topic was created while the voter was replaced")
	}
	t.Logf("%d topics created while node 3 was replaced", len(created))
	load.finish(t, ctx, e)
}

// fjordCLI runs the fjord binary with args against the cluster and
// wants want in its output.
func (e *env) fjordCLI(t *testing.T, want string, args ...string) {
	t.Helper()
	cmd := exec.Command(testcluster.Binary(t), append(args, "--brokers", e.c.Brokers())...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("fjord %s: %v\n%s\nwant %q", strings.Join(args, " "), err, out, want)
	}
}

// quorumIs waits until DescribeQuorum, asked of every running node,
// answers these voters and observers.
func (e *env) quorumIs(t *testing.T, ctx context.Context, voters, observers []int32) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, n := range e.c.Nodes() {
			if !n.Running() {
				continue
			}
			gotV, gotO, err := describeQuorum(ctx, n.KafkaAddr())
			if err != nil {
				return fmt.Errorf("node %d: %w", n.ID(), err)
			}
			if !slices.Equal(gotV, voters) || !slices.Equal(gotO, observers) {
				return fmt.Errorf("node %d: voters %v, observers %v; want %v and %v", n.ID(), gotV, gotO, voters, observers)
			}
		}
		return nil
	})
}

func describeQuorum(ctx context.Context, addr string) (voters, observers []int32, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = []kmsg.DescribeQuorumRequestTopicPartition{rp}
	req.Topics = []kmsg.DescribeQuorumRequestTopic{rt}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, nil, fmt.Errorf("DescribeQuorum answered %d topics", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return nil, nil, fmt.Errorf("DescribeQuorum: error code %d", p.ErrorCode)
	}
	for _, v := range p.CurrentVoters {
		voters = append(voters, v.ReplicaID)
	}
	for _, o := range p.Observers {
		observers = append(observers, o.ReplicaID)
	}
	slices.Sort(voters)
	slices.Sort(observers)
	return voters, observers, nil
}
