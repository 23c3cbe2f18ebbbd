package migrate

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKeys(t *testing.T) {
	kind, src, seq, err := decodeKey(migrationKey("orders"))
	if err != nil || kind != kindMigration || src != "orders" || seq != 0 {
		t.Fatalf("migration key: %c %q %d %v", kind, src, seq, err)
	}
	kind, src, seq, err = decodeKey(checkpointKey("orders.v1_x-y", 1234567))
	if err != nil || kind != kindCheckpoint || src != "orders.v1_x-y" || seq != 1234567 {
		t.Fatalf("checkpoint key: %c %q %d %v", kind, src, seq, err)
	}
	for _, bad := range []string{
		"", "m", "m\x00", "x\x00orders", "mm\x00orders", "m\x00bad topic", "m\x00orders\x00extra",
		"c\x00orders", "c\x00orders\x0012", "c\x00orders\x00-000000000000001", "c\x00orders\x00000000000000000x",
		"c\x00" + strings.Repeat("a", 250) + "\x000000000000000001",
	} {
		if _, _, _, err := decodeKey([]byte(bad)); !errors.Is(err, errUndecodable) {
			t.Errorf("decodeKey(%q) = %v, want errUndecodable", bad, err)
		}
	}
}

func TestApply(t *testing.T) {
	all := map[string]*states{}
	m := Migration{Source: "a", Dest: "b", SourcePartitions: 2, DestPartitions: 4, Step: StepCopying}
	if err := apply(all, migrationKey("a"), mustJSON(t, m)); err != nil {
		t.Fatal(err)
	}
	cp := Checkpoint{Seq: 0, SourceNext: []int64{0, 0}, DestNext: []int64{0, 0, 0, 0}}
	if err := apply(all, checkpointKey("a", 0), mustJSON(t, cp)); err != nil {
		t.Fatal(err)
	}
	if got := all["a"]; got.migration == nil || *got.migration != m || len(got.checkpoints) != 1 {
		t.Fatalf("state %+v", got)
	}
	// Refused, each leaving the state as it was for other keys.
	for name, tc := range map[string]struct {
		key, value []byte
	}{
		"not json":              {migrationKey("a"), []byte("{")},
		"another source":        {migrationKey("a"), mustJSON(t, Migration{Source: "z", Dest: "b", SourcePartitions: 1, DestPartitions: 1, Step: StepCopying})},
		"dest is source":        {migrationKey("a"), mustJSON(t, Migration{Source: "a", Dest: "a", SourcePartitions: 1, DestPartitions: 1, Step: StepCopying})},
		"fewer dest partitions": {migrationKey("a"), mustJSON(t, Migration{Source: "a", Dest: "b", SourcePartitions: 4, DestPartitions: 2, Step: StepCopying})},
		"unknown step":          {migrationKey("a"), mustJSON(t, Migration{Source: "a", Dest: "b", SourcePartitions: 1, DestPartitions: 1, Step: "flying"})},
		"seq mismatch":          {checkpointKey("a", 1), mustJSON(t, Checkpoint{Seq: 2})},
		"oversized":             {checkpointKey("a", 1), make([]byte, maxValueBytes+1)},
	} {
		all := map[string]*states{}
		if err := apply(all, tc.key, tc.value); !errors.Is(err, errUndecodable) {
			t.Errorf("%s: %v, want errUndecodable", name, err)
		}
		if st := all["a"]; st != nil && (st.migration != nil || len(st.checkpoints) != 0) {
			t.Errorf("%s: left %+v", name, st)
		}
	}
	// A tombstone removes the key's entry.
	if err := apply(all, checkpointKey("a", 0), nil); err != nil || len(all["a"].checkpoints) != 0 {
		t.Fatalf("tombstone: %v, %v", err, all["a"].checkpoints)
	}
	if err := apply(all, migrationKey("a"), nil); err != nil || all["a"].migration != nil {
		t.Fatalf("tombstone: %v, %v", err, all["a"].migration)
	}
}

func TestChain(t *testing.T) {
	m := &Migration{Source: "a", Dest: "b", SourcePartitions: 1, DestPartitions: 2, Step: StepCopying}
	mk := func(cps ...Checkpoint) *states {
		st := &states{migration: m, checkpoints: map[int64]Checkpoint{}}
		for _, c := range cps {
			st.checkpoints[c.Seq] = c
		}
		return st
	}
	good := []Checkpoint{
		{Seq: 0, SourceNext: []int64{5}, DestNext: []int64{0, 0}},
		{Seq: 1, SourceNext: []int64{9}, DestNext: []int64{2, 3}},
	}
	if got, err := mk(good...).chain(); err != nil || len(got) != 2 || got[1].Seq != 1 {
		t.Fatalf("chain: %v, %v", got, err)
	}
	for name, st := range map[string]*states{
		"gap":           mk(good[0], Checkpoint{Seq: 2, SourceNext: []int64{9}, DestNext: []int64{2, 3}}),
		"source back":   mk(good[0], Checkpoint{Seq: 1, SourceNext: []int64{4}, DestNext: []int64{2, 3}}),
		"dest back":     mk(good[1], Checkpoint{Seq: 0, SourceNext: []int64{0}, DestNext: []int64{5, 0}}),
		"wrong lengths": mk(Checkpoint{Seq: 0, SourceNext: []int64{0, 0}, DestNext: []int64{0, 0}}),
	} {
		if _, err := st.chain(); err == nil {
			t.Errorf("%s: chain accepted", name)
		}
	}
}

// Translate: two source partitions into three destination partitions,
// three chunks.
func TestTranslate(t *testing.T) {
	cps := []Checkpoint{
		{Seq: 0, SourceNext: []int64{0, 100}, DestNext: []int64{0, 0, 0}},
		{Seq: 1, SourceNext: []int64{10, 100}, DestNext: []int64{4, 3, 3}},   // s0 0..9
		{Seq: 2, SourceNext: []int64{10, 120}, DestNext: []int64{11, 10, 9}}, // s1 100..119
		{Seq: 3, SourceNext: []int64{15, 130}, DestNext: []int64{15, 14, 13}},
	}
	for _, tc := range []struct {
		name      string
		committed []int64
		want      []int64
	}{
		{"nothing committed", []int64{-1, -1}, []int64{0, 0, 0}},
		{"short slice", nil, []int64{0, 0, 0}},
		{"inside the first chunk", []int64{5, 100}, []int64{0, 0, 0}},
		// Chunk 1 consumed whole; chunk 2 holds s1's unconsumed 100+.
		{"first chunk consumed", []int64{10, 100}, []int64{4, 3, 3}},
		{"inside the second chunk", []int64{10, 110}, []int64{4, 3, 3}},
		{"two chunks consumed", []int64{10, 120}, []int64{11, 10, 9}},
		// s1 consumed far, s0 not: the chunk with s0's unconsumed
		// records decides.
		{"one partition behind", []int64{12, 130}, []int64{11, 10, 9}},
		{"everything consumed", []int64{15, 130}, []int64{15, 14, 13}},
		{"past the copy", []int64{99, 999}, []int64{15, 14, 13}},
	} {
		got := Translate(cps, tc.committed)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: Translate(%v) = %v, want %v", tc.name, tc.committed, got, tc.want)
		}
	}
	// The answer is a copy.
	got := Translate(cps, []int64{15, 130})
	got[0] = -7
	if cps[3].DestNext[0] != 15 {
		t.Fatal("Translate returned the checkpoint's own slice")
	}
}
