package testcluster

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fjordmq/fjord/internal/testutil"
)

// The real fjord binary as a cluster (cluster_harness_test.go tests the
// harness against fakes).

// clusterReadyTimeout bounds a real cluster's start: well above the
// second or two a three-node quorum takes on a busy machine, well below
// the node's own minute, so a cluster that cannot form fails in
// reasonable time.
const clusterReadyTimeout = 30 * time.Second

// checkOneCluster asks every node's Kafka Metadata API, each node itself,
// and checks that they tell one story: every node listed as a broker at
// its own address, one cluster id, and the controller id the cluster
// agrees on. It returns the cluster id and the controller.
func checkOneCluster(t *testing.T, c *Cluster) (clusterID string, controller int32) {
	t.Helper()
	controller = c.ControllerID(t)
	want := map[int32]string{}
	for _, n := range c.Nodes() {
		want[n.ID()] = n.KafkaAddr()
	}
	// Eventually: Metadata lists unfenced brokers, and a node that has
	// just started is unfenced in the others' images a moment after its
	// own.
	testutil.Eventually(t, 10*time.Second, func() error {
		clusterID = ""
		for _, n := range c.Nodes() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := n.Metadata(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("node %d: %w", n.ID(), err)
			}
			got := map[int32]string{}
			for _, b := range resp.Brokers {
				got[b.NodeID] = fmt.Sprintf("%s:%d", b.Host, b.Port)
			}
			if !maps.Equal(got, want) {
				return fmt.Errorf("node %d lists brokers %v, want %v", n.ID(), got, want)
			}
			if resp.ClusterID == nil || *resp.ClusterID == "" {
				return fmt.Errorf("node %d gives no cluster id", n.ID())
			}
			if clusterID == "" {
				clusterID = *resp.ClusterID
			} else if *resp.ClusterID != clusterID {
				t.Fatalf("node %d is in cluster %s, an earlier node in %s", n.ID(), *resp.ClusterID, clusterID)
			}
			if resp.ControllerID != controller {
				return fmt.Errorf("node %d names controller %d, the cluster %d", n.ID(), resp.ControllerID, controller)
			}
		}
		return nil
	})
	if _, ok := want[controller]; !ok {
		t.Fatalf("controller %d is not one of the nodes", controller)
	}
	return clusterID, controller
}

// Issue 13's first acceptance test: three nodes started in any order
// (and restarted in any order) form one cluster with one active
// controller and one cluster id; the Kafka Metadata API on every node
// lists all three brokers and the same controller id.
func TestClusterOfThreeFormsOneCluster(t *testing.T) {
	c := StartCluster(t, ClusterOptions{
		Nodes: 3,
		Node:  Options{ReadyTimeout: clusterReadyTimeout},
		// Not 1, 2, 3, and apart, so the last node joins a quorum that
		// may already have elected.
		Order:      []int32{3, 1, 2},
		StartDelay: 200 * time.Millisecond,
	})
	clusterID, _ := checkOneCluster(t, c)

	// Stopped whole and started in another order: the same cluster,
	// from the metadata log on disk, not a new one.
	c.Stop(1, 3, 2)
	c.Start(2, 3, 1)
	if again, _ := checkOneCluster(t, c); again != clusterID {
		t.Fatalf("after a restart of every node the cluster id is %s, was %s", again, clusterID)
	}

	// The controller crashes and comes back: still one cluster.
	controller := c.ControllerID(t)
	c.Kill(controller)
	c.Start(controller)
	if again, _ := checkOneCluster(t, c); again != clusterID {
		t.Fatalf("after the controller's crash the cluster id is %s, was %s", again, clusterID)
	}
}

// A cluster of one is what every node is without a quorum of others:
// the harness's questions (controller, leader, each node's metadata)
// answered by the real binary, on a cluster that forms on this branch.
func TestClusterOfOne(t *testing.T) {
	c := StartCluster(t, ClusterOptions{Nodes: 1, Node: Options{ReadyTimeout: clusterReadyTimeout}})
	clusterID, controller := checkOneCluster(t, c)
	if controller != 1 {
		t.Fatalf("controller %d, want 1", controller)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	for p := range int32(2) {
		if got := c.Leader(t, "orders", p); got != 1 {
			t.Fatalf("leader of orders-%d: %d, want 1", p, got)
		}
	}
	resp, err := c.Node(1).Metadata(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("metadata of orders: %+v", resp.Topics)
	}

	// A crash and a start on the same ports and data directory.
	c.Kill()
	c.Start()
	if again, _ := checkOneCluster(t, c); again != clusterID {
		t.Fatalf("cluster id %s after a restart, was %s", again, clusterID)
	}
	if c.Brokers() != c.Node(1).KafkaAddr() {
		t.Fatalf("Brokers() = %q, want node 1's %q", c.Brokers(), c.Node(1).KafkaAddr())
	}
}
