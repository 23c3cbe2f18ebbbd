package kafkaserver

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func codesOf(resp any) []string {
	var out []string
	eachErrorCode(resp, func(c int16) { out = append(out, errorName(c)) })
	slices.Sort(out)
	return out
}

// Every level's codes are found, zeros are not counted, and the ranged
// fetch wrapper is seen through.
func TestEachErrorCode(t *testing.T) {
	fetch := kmsg.NewPtrFetchResponse()
	fetch.ErrorCode = kerr.FetchSessionIDNotFound.Code
	for ti := range 2 {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = fmt.Sprint("t", ti)
		for p := range 3 {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = int32(p)
			rp.RecordBatches = make([]byte, 100)
			if p == 1 {
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		fetch.Topics = append(fetch.Topics, rt)
	}
	join := kmsg.NewPtrJoinGroupResponse()
	join.ErrorCode = kerr.MemberIDRequired.Code
	commit := kmsg.NewPtrOffsetCommitResponse()
	commitTopic := kmsg.NewOffsetCommitResponseTopic()
	commitPart := kmsg.NewOffsetCommitResponseTopicPartition()
	commitPart.ErrorCode = 9999 // no such code: named by its number
	commitTopic.Partitions = append(commitTopic.Partitions, commitPart)
	commit.Topics = append(commit.Topics, commitTopic)

	for _, tc := range []struct {
		name string
		resp any
		want []string
	}{
		{"fetch", fetch, []string{"FETCH_SESSION_ID_NOT_FOUND", "OFFSET_OUT_OF_RANGE", "OFFSET_OUT_OF_RANGE"}},
		{"ranged fetch", &rangedFetch{FetchResponse: fetch}, []string{"FETCH_SESSION_ID_NOT_FOUND", "OFFSET_OUT_OF_RANGE", "OFFSET_OUT_OF_RANGE"}},
		{"join", join, []string{"MEMBER_ID_REQUIRED"}},
		{"commit", commit, []string{"9999"}},
		{"no errors", kmsg.NewPtrProduceResponse(), nil},
		{"nil", nil, nil},
	} {
		if got := codesOf(tc.resp); !slices.Equal(got, tc.want) {
			t.Errorf("%s: codes %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The walk of a 16-partition fetch answer, the common hot case.
func BenchmarkEachErrorCodeFetch16(b *testing.B) {
	fetch := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	for p := range 16 {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.Partition = int32(p)
		rp.RecordBatches = make([]byte, 1<<10)
		rt.Partitions = append(rt.Partitions, rp)
	}
	fetch.Topics = append(fetch.Topics, rt)
	n := 0
	for b.Loop() {
		eachErrorCode(fetch, func(int16) { n++ })
	}
	if n != 0 {
		b.Fatal("codes found in an answer without any")
	}
}
