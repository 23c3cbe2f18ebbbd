package migrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/fjordmq/fjord/internal/metadata"
)

// StateTopic holds every migration's state (package doc, State).
const StateTopic = "__fjord_migrations"

// Step is how far a migration has gone. Each is written to StateTopic
// before the work it names starts, so a run that finds it knows what to
// finish: every step's work is safe to do again.
type Step string

const (
	// StepCreating: the destination is being created.
	StepCreating Step = "creating"
	// StepCopying: the destination exists and records are being copied.
	StepCopying Step = "copying"
	// StepCutover: the source is being sealed (it refuses produces) and
	// drained into the destination.
	StepCutover Step = "cutover"
	// StepOpening: the source is drained; the destination is being
	// opened to producers.
	StepOpening Step = "opening"
	// StepGroups: the destination is open; consumer groups' offsets
	// are being moved to it.
	StepGroups Step = "groups"
	// StepDone: every group is moved. Nothing is left to do.
	StepDone Step = "done"
)

var stepOrder = []Step{StepCreating, StepCopying, StepCutover, StepOpening, StepGroups, StepDone}

// Migration is one migration's plan and step: the value of its
// migration record.
type Migration struct {
	Source           string `json:"source"`
	Dest             string `json:"dest"`
	SourcePartitions int32  `json:"source_partitions"`
	DestPartitions   int32  `json:"dest_partitions"`
	Step             Step   `json:"step"`
	// StartedMs is when the first run began (Unix ms), for the progress
	// shown.
	StartedMs int64 `json:"started_ms"`
}

// Checkpoint is the offset map, a piece at a time: each copy
// transaction commits one, with the destination records it wrote. After
// checkpoint k, every record of source partition s below SourceNext[s]
// is in the destination, and the records written to destination
// partition d up to checkpoint k lie below DestNext[d] (the transaction
// marker that ends the chunk sits at DestNext[d] when the chunk wrote to
// d). Checkpoint 0 is the start: the source's log start offsets, and
// zeros.
type Checkpoint struct {
	Seq        int64   `json:"seq"`
	SourceNext []int64 `json:"source_next"`
	DestNext   []int64 `json:"dest_next"`
}

// Keys: a kind byte, the source topic, and for a checkpoint its
// sequence number as 16 decimal digits, so that compaction keeps every
// checkpoint (each its own key) and one migration record per source (its
// newest). Topic names cannot hold the NUL separator.
const (
	kindMigration  = 'm'
	kindCheckpoint = 'c'
)

func migrationKey(src string) []byte {
	return []byte(string(kindMigration) + "\x00" + src)
}

func checkpointKey(src string, seq int64) []byte {
	return fmt.Appendf(nil, "%c\x00%s\x00%016d", kindCheckpoint, src, seq)
}

// maxValueBytes bounds a state value read back: a checkpoint of the
// largest topics (two arrays of at most 10,000 offsets each) fits well
// within it.
const maxValueBytes = 1 << 20

// errUndecodable is a state record this code cannot read.
var errUndecodable = errors.New("migrate: undecodable state record")

// decodeKey splits a state record's key into kind, source and (for a
// checkpoint) sequence number.
func decodeKey(k []byte) (kind byte, src string, seq int64, err error) {
	parts := strings.Split(string(k), "\x00")
	if len(parts) < 2 || len(parts[0]) != 1 || metadata.ValidateTopicName(parts[1]) != nil {
		return 0, "", 0, fmt.Errorf("%w: key %q", errUndecodable, k)
	}
	switch kind, src = parts[0][0], parts[1]; {
	case kind == kindMigration && len(parts) == 2:
		return kind, src, 0, nil
	case kind == kindCheckpoint && len(parts) == 3 && len(parts[2]) == 16:
		seq, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || seq < 0 {
			break
		}
		return kind, src, seq, nil
	}
	return 0, "", 0, fmt.Errorf("%w: key %q", errUndecodable, k)
}

// states is what StateTopic holds for one source, as read.
type states struct {
	migration   *Migration
	checkpoints map[int64]Checkpoint
}

// apply folds one state record into all, keyed by source. A tombstone
// removes its key's entry; an undecodable record is reported and left
// out (StateTopic is an ordinary topic: anyone may write to it).
func apply(all map[string]*states, key, value []byte) error {
	kind, src, seq, err := decodeKey(key)
	if err != nil {
		return err
	}
	st := all[src]
	if st == nil {
		st = &states{checkpoints: map[int64]Checkpoint{}}
		all[src] = st
	}
	if len(value) > maxValueBytes {
		return fmt.Errorf("%w: a value of %d bytes under %q", errUndecodable, len(value), key)
	}
	switch kind {
	case kindMigration:
		st.migration = nil
		if value == nil {
			return nil
		}
		var m Migration
		if err := json.Unmarshal(value, &m); err != nil {
			return fmt.Errorf("%w: %v", errUndecodable, err)
		}
		if err := m.check(src); err != nil {
			return err
		}
		st.migration = &m
	case kindCheckpoint:
		delete(st.checkpoints, seq)
		if value == nil {
			return nil
		}
		var c Checkpoint
		if err := json.Unmarshal(value, &c); err != nil {
			return fmt.Errorf("%w: %v", errUndecodable, err)
		}
		if c.Seq != seq {
			return fmt.Errorf("%w: checkpoint %d under the key of %d", errUndecodable, c.Seq, seq)
		}
		st.checkpoints[seq] = c
	}
	return nil
}

// check refuses a migration record that could not have been written.
func (m *Migration) check(src string) error {
	switch {
	case m.Source != src:
		return fmt.Errorf("%w: migration of %q under the key of %q", errUndecodable, m.Source, src)
	case metadata.ValidateTopicName(m.Dest) != nil || m.Dest == m.Source:
		return fmt.Errorf("%w: destination %q", errUndecodable, m.Dest)
	case m.SourcePartitions < 1 || m.DestPartitions < m.SourcePartitions:
		return fmt.Errorf("%w: %d source and %d destination partitions", errUndecodable, m.SourcePartitions, m.DestPartitions)
	case !slices.Contains(stepOrder, m.Step):
		return fmt.Errorf("%w: step %q", errUndecodable, m.Step)
	}
	return nil
}

// chain returns the checkpoints of m in order, checking that they are
// the whole chain from 0 and fit m's partition counts: each partition's
// offsets only grow. A gap or a shrink means the state was damaged (by
// hand, or compaction's tombstones), and the migration cannot say what
// it copied; it stops rather than guess.
func (st *states) chain() ([]Checkpoint, error) {
	m := st.migration
	cps := make([]Checkpoint, 0, len(st.checkpoints))
	for seq := int64(0); seq < int64(len(st.checkpoints)); seq++ {
		c, ok := st.checkpoints[seq]
		if !ok {
			return nil, fmt.Errorf("migrate: the state of %s's migration lacks checkpoint %d of %d", m.Source, seq, len(st.checkpoints))
		}
		if len(c.SourceNext) != int(m.SourcePartitions) || len(c.DestNext) != int(m.DestPartitions) {
			return nil, fmt.Errorf("migrate: checkpoint %d of %s's migration has %d source and %d destination offsets, want %d and %d",
				seq, m.Source, len(c.SourceNext), len(c.DestNext), m.SourcePartitions, m.DestPartitions)
		}
		if seq > 0 {
			prev := cps[seq-1]
			for i := range c.SourceNext {
				if c.SourceNext[i] < prev.SourceNext[i] {
					return nil, fmt.Errorf("migrate: checkpoint %d of %s's migration moves source partition %d back", seq, m.Source, i)
				}
			}
			for i := range c.DestNext {
				if c.DestNext[i] < prev.DestNext[i] {
					return nil, fmt.Errorf("migrate: checkpoint %d of %s's migration moves destination partition %d back", seq, m.Source, i)
				}
			}
		}
		cps = append(cps, c)
	}
	return cps, nil
}

// Translate maps a group's committed offsets on the source (committed[s]
// for source partition s; -1 or missing for none, read as the start) to
// offsets on the destination that lose nothing: for each destination
// partition, the start of the first chunk holding a record the group had
// not consumed. The records before it in that partition all came from
// chunks the group had consumed whole; the ones after may include
// records it had consumed, delivered again (at-least-once, at most a
// chunk's worth per partition).
func Translate(cps []Checkpoint, committed []int64) []int64 {
	last := cps[len(cps)-1]
	for k := 1; k < len(cps); k++ {
		for s, next := range cps[k].SourceNext {
			c := int64(-1)
			if s < len(committed) {
				c = committed[s]
			}
			// The chunk covers [cps[k-1].SourceNext[s], next) of s.
			if next > cps[k-1].SourceNext[s] && next > c {
				return slices.Clone(cps[k-1].DestNext)
			}
		}
	}
	return slices.Clone(last.DestNext)
}
