package httpapi_test

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/testcluster"
	"github.com/fjordmq/fjord/internal/testutil"
)

// fjord runs the fjord CLI against e's node and returns what it printed.
func (e *env) fjord(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(testcluster.Binary(e.t), append(args, "--brokers", e.n.KafkaAddr().String())...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		e.t.Fatalf("fjord %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// The HTTP API and the CLI say the same of a topic and a group: the
// topic id in one form (Kafka's base64; HTTP printed the UUID's hex
// form), and the group's partitions, the CLI's rows: every partition
// assigned to a member or with a commit (HTTP listed only those with a
// commit), a committed offset, log end and lag where there is one and
// null where there is none (HTTP had -1 for none).
func TestTopicAndGroupViewsMatchTheCLI(t *testing.T) {
	e := newEnv(t)
	e.createTopic("t", 3)
	e.produceN("t", 0, 4)
	e.produceN("t", 1, 2)
	var res result
	if st := e.do("POST", "/v1/topics/t/commit", `{"group": "g", "offsets": {"0": 1}}`, &res); st != 200 {
		t.Fatalf("commit: %d %+v", st, res)
	}

	var topic struct {
		ID string `json:"id"`
	}
	if st := e.do("GET", "/v1/topics/t", "", &topic); st != 200 {
		t.Fatalf("describe topic: %d", st)
	}
	if cli := e.fjord("topic", "describe", "t"); !strings.Contains(cli, "Topic ID: "+topic.ID+"\n") {
		t.Errorf("HTTP says topic id %q; the CLI printed:\n%s", topic.ID, cli)
	}

	type groupView struct {
		Offsets []groupOffsetJSON `json:"offsets"`
	}
	// rows renders a view as the CLI's table rows: topic, partition,
	// committed, log end, lag, lag bytes, lag time, member, "-" for none.
	rows := func(v groupView) string {
		dash := func(p *int64) string {
			if p == nil {
				return "-"
			}
			return strconv.FormatInt(*p, 10)
		}
		var b strings.Builder
		for _, o := range v.Offsets {
			member := "-"
			if o.Member != nil {
				member = *o.Member
			}
			// The lag in time differs between two looks, a moment
			// apart: compared is whether there is one.
			age := "-"
			if o.LagSeconds != nil {
				age = "t"
			}
			fmt.Fprintf(&b, "%s %d %s %s %s %s %s %s\n", o.Topic, o.Partition, dash(o.Committed), dash(o.LogEnd), dash(o.Lag), dash(o.LagBytes), age, member)
		}
		return b.String()
	}
	cliRows := func(out string) string {
		_, table, ok := strings.Cut(out, "TOPIC ")
		if !ok {
			t.Fatalf("no partition table in:\n%s", out)
		}
		var b strings.Builder
		for _, line := range strings.Split(table, "\n")[1:] {
			if f := strings.Fields(line); len(f) == 8 {
				if f[6] != "-" {
					f[6] = "t"
				}
				b.WriteString(strings.Join(f, " ") + "\n")
			} else if len(f) > 0 {
				t.Fatalf("a partition row of %d columns, want 8: %q", len(f), line)
			}
		}
		return b.String()
	}
	compare := func(when string) {
		t.Helper()
		var v groupView
		if st := e.do("GET", "/v1/groups/g", "", &v); st != 200 {
			t.Fatalf("describe group: %d", st)
		}
		if h, c := rows(v), cliRows(e.fjord("group", "describe", "g")); h != c {
			t.Errorf("%s: HTTP's group view:\n%s\nthe CLI's:\n%s", when, h, c)
		}
	}
	compare("without members")

	// A member assigned all three partitions, only one committed.
	testutil.Eventually(t, 30*time.Second, func() error {
		var c struct {
			consumed
			Joining bool `json:"joining"`
		}
		if st := e.do("GET", "/v1/topics/t/consume?group=g&timeout_ms=200", "", &c); st != 200 || c.Joining {
			return fmt.Errorf("consume: %d joining %v", st, c.Joining)
		}
		return nil
	})
	e.waitStable("g", 1, func() {})
	compare("with a member")
	var v groupView
	e.do("GET", "/v1/groups/g", "", &v)
	if len(v.Offsets) != 3 || v.Offsets[1].Committed != nil || v.Offsets[1].Lag != nil || v.Offsets[1].LogEnd == nil || *v.Offsets[1].LogEnd != 2 {
		t.Fatalf("group view %s, want 3 partitions, 1 and 2 without a commit (null) or lag", rows(v))
	}
}
