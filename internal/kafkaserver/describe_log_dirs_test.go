package kafkaserver

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/replica"
)

func TestDescribeLogDirs(t *testing.T) {
	f := newAdminFixture(t)
	f.reps.infos = []replica.LogDirInfo{
		{Topic: "b", Partition: 1, Size: 300},
		{Topic: "a", Partition: 2, Size: 200, OffsetLag: 3},
		{Topic: "b", Partition: 0, Size: 100},
		{Topic: "a", Partition: 0, Size: 50},
	}

	type part struct {
		topic string
		p     int32
		size  int64
	}
	flatten := func(d kmsg.DescribeLogDirsResponseDir) []part {
		var out []part
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				out = append(out, part{t.Topic, p.Partition, p.Size})
			}
		}
		return out
	}

	// v0, all topics (null list): sorted by topic then partition, no
	// volume sizes on the wire.
	resp := adminCall[*kmsg.DescribeLogDirsResponse](t, f, kmsg.NewPtrDescribeLogDirsRequest(), 0)
	if len(resp.Dirs) != 1 || resp.Dirs[0].Dir != "/data/fjord" || resp.Dirs[0].ErrorCode != 0 {
		t.Fatalf("dirs %+v", resp.Dirs)
	}
	d := resp.Dirs[0]
	if got, want := flatten(d), []part{{"a", 0, 50}, {"a", 2, 200}, {"b", 0, 100}, {"b", 1, 300}}; !equalParts(got, want) {
		t.Fatalf("partitions %v, want %v", got, want)
	}
	if len(d.Topics) != 2 || d.Topics[0].Partitions[1].OffsetLag != 3 {
		t.Fatalf("grouping or lag wrong: %+v", d.Topics)
	}
	if d.TotalBytes != -1 || d.UsableBytes != -1 {
		t.Fatalf("v0 carries no volume sizes: %d %d", d.TotalBytes, d.UsableBytes)
	}

	// v4, a subset: only listed partitions this dir holds.
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{
		{Topic: "b", Partitions: []int32{1, 7}},
		{Topic: "zzz", Partitions: []int32{0}},
		{Topic: "a", Partitions: []int32{}},
	}
	resp = adminCall[*kmsg.DescribeLogDirsResponse](t, f, req, 4)
	d = resp.Dirs[0]
	if got, want := flatten(d), []part{{"b", 1, 300}}; !equalParts(got, want) {
		t.Fatalf("subset %v, want %v", got, want)
	}
	if d.TotalBytes != 1<<40 || d.UsableBytes != 1<<39 || resp.ErrorCode != 0 {
		t.Fatalf("v4 volume sizes %d %d, error %d", d.TotalBytes, d.UsableBytes, resp.ErrorCode)
	}

	// An empty (non-null) topic list asks for nothing.
	req = kmsg.NewPtrDescribeLogDirsRequest()
	req.Topics = []kmsg.DescribeLogDirsRequestTopic{}
	resp = adminCall[*kmsg.DescribeLogDirsResponse](t, f, req, 2)
	if len(resp.Dirs[0].Topics) != 0 {
		t.Fatalf("empty list answered %+v", resp.Dirs[0].Topics)
	}
}

func equalParts[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
