package kafkaserver

// DescribeLogDirs: v0-4
//
// This node's one data directory (Fjord keeps every partition log under
// --data-dir) and the partitions in it: size in bytes and offset lag
// (Kafka's max(HW - LEO, 0): how far this replica's log end is behind
// the high watermark, 0 on a leader). A null topic list asks for
// every partition; otherwise only the listed partitions of the listed
// topics that this directory holds are returned (others are left out, as
// in Kafka). Topics and partitions come sorted. v3+ carry a top-level
// error code (always 0: the directory is this node's and always online
// while it serves); v4+ the volume's total and usable bytes.
//
// Authorization: DESCRIBE on the cluster. Denied, the answer lists no
// directory and, from v3, carries CLUSTER_AUTHORIZATION_FAILED at the top
// (v0-2 have no field for it: an empty answer is all Kafka gives them);
// the replicas are not asked.

import (
	"cmp"
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/replica"
)

func handleDescribeLogDirs(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeLogDirsRequest)
	resp := kmsg.NewPtrDescribeLogDirsResponse()
	resp.SetVersion(req.version)
	if err := s.clusterDenied(req, acl.OperationDescribe); err != nil {
		resp.ErrorCode, _ = s.errorAndMessage(err, "DescribeLogDirs") // v3+; not encoded below
		return resp, nil, nil
	}

	dir, total, usable, parts := s.replicas.LogDirs()
	var want map[string]map[int32]bool // nil: every partition
	if r.Topics != nil {
		want = make(map[string]map[int32]bool, len(r.Topics))
		for _, t := range r.Topics {
			if want[t.Topic] == nil {
				want[t.Topic] = make(map[int32]bool, len(t.Partitions))
			}
			for _, p := range t.Partitions {
				want[t.Topic][p] = true
			}
		}
	}
	parts = slices.DeleteFunc(slices.Clone(parts), func(p replica.LogDirInfo) bool {
		return want != nil && !want[p.Topic][p.Partition]
	})
	slices.SortFunc(parts, func(a, b replica.LogDirInfo) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})

	rd := kmsg.NewDescribeLogDirsResponseDir()
	rd.Dir = dir
	rd.TotalBytes, rd.UsableBytes = total, usable
	for _, p := range parts {
		if n := len(rd.Topics); n == 0 || rd.Topics[n-1].Topic != p.Topic {
			rt := kmsg.NewDescribeLogDirsResponseDirTopic()
			rt.Topic = p.Topic
			rd.Topics = append(rd.Topics, rt)
		}
		rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		rp.Partition, rp.Size, rp.OffsetLag = p.Partition, p.Size, p.OffsetLag
		rt := &rd.Topics[len(rd.Topics)-1]
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Dirs = append(resp.Dirs, rd)
	return resp, nil, nil
}
