package bench

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every shipped workload loads by bare name, is valid, and is named
// after its file.
func TestShippedWorkloads(t *testing.T) {
	names := WorkloadNames()
	want := []string{"catchup-2gb", "latency-16p-1kb-50k", "latency-16p-1kb-5k", "max-rate-16p-100b", "max-rate-16p-1kb-4p4c", "max-rate-1p-1kb"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("shipped workloads %v, want %v", names, want)
	}
	for _, name := range names {
		w, err := LoadWorkload(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if w.Name != name {
			t.Errorf("%s.yaml is named %q", name, w.Name)
		}
	}
	w, _ := LoadWorkload("max-rate-16p-1kb-4p4c")
	if w.PartitionsPerTopic != 16 || w.ProducersPerTopic != 4 || w.ConsumerPerSubscription != 4 || w.MessageSize != 1024 || w.ProducerRate != 0 {
		t.Errorf("max-rate-16p-1kb-4p4c: %+v", w)
	}
	w, _ = LoadWorkload("latency-16p-1kb-5k")
	if w.ProducerRate != 5000 || w.TestDurationSeconds != 30 || w.WarmupSeconds != 10 {
		t.Errorf("latency-16p-1kb-5k: %+v", w)
	}
	w, _ = LoadWorkload("catchup-2gb")
	if w.ConsumerBacklogSizeGB != 2 || !w.catchUp() || w.backlogBytes() != 2<<30 {
		t.Errorf("catchup-2gb: %+v", w)
	}
}

const goodWorkload = `
name: custom
topics: 2
partitionsPerTopic: 8
messageSize: 512
producersPerTopic: 2
consumerPerSubscription: 4
producerRate: 10000
testDurationSeconds: 1.5
`

func TestParseWorkloadDefaults(t *testing.T) {
	w, err := ParseWorkload([]byte(goodWorkload), "custom.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := Workload{Name: "custom", Topics: 2, PartitionsPerTopic: 8, MessageSize: 512, PayloadRandomness: 1,
		SubscriptionsPerTopic: 1, ConsumerPerSubscription: 4, ProducersPerTopic: 2, ProducerRate: 10000,
		TestDurationSeconds: 1.5, KeyDistributor: NoKey}
	if *w != want {
		t.Errorf("parsed\n%+v\nwant\n%+v", *w, want)
	}
}

// replicationFactor is optional (0: the run decides) and read as given.
func TestParseWorkloadReplicationFactor(t *testing.T) {
	w, err := ParseWorkload([]byte(withLine("replicationFactor: 3", true)), "rf.yaml")
	if err != nil || w.ReplicationFactor != 3 {
		t.Fatalf("parsed %+v, %v; want replicationFactor 3", w, err)
	}
	for _, name := range WorkloadNames() {
		if w, _ := LoadWorkload(name); w.ReplicationFactor != 0 {
			t.Errorf("%s sets replicationFactor %d: the shipped ones leave it to the run, so one file serves 1 and 3 nodes", name, w.ReplicationFactor)
		}
	}
}

func TestLoadWorkloadFromFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "custom.yaml")
	if err := os.WriteFile(path, []byte(goodWorkload), 0o644); err != nil {
		t.Fatal(err)
	}
	if w, err := LoadWorkload(path); err != nil || w.Name != "custom" {
		t.Fatalf("LoadWorkload(%s) = %+v, %v", path, w, err)
	}
	if _, err := LoadWorkload(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	_, err := LoadWorkload("max-rate-1p-1k")
	if !errors.Is(err, ErrUnknownWorkload) || !strings.Contains(err.Error(), "max-rate-1p-1kb") {
		t.Errorf("unknown name: %v; want ErrUnknownWorkload listing the shipped ones", err)
	}
}

// withLine returns goodWorkload with line in place of the field's own
// line, or added when add is set.
func withLine(line string, add bool) string {
	field := strings.SplitN(line, ":", 2)[0]
	var kept []string
	for _, l := range strings.Split(strings.TrimSpace(goodWorkload), "\n") {
		if add || !strings.HasPrefix(l, field+":") {
			kept = append(kept, l)
		}
	}
	return strings.Join(append(kept, line), "\n") + "\n"
}

// Each bad input is refused with a message naming the file, the field,
// the value and what is allowed.
func TestParseWorkloadRejects(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		add        bool
		want       string
	}{
		{"unknown field", "testDurationMinutes: 1", true, `unknown field "testDurationMinutes" on line 9 (allowed: name, topics,`},
		{"repeated field", "topics: 3", true, "field topics given twice (line 9)"},
		{"wrong type", "producersPerTopic: many", false, `producersPerTopic "many" on line 8: want an integer`},
		{"fraction for an integer", "messageSize: 1.5", false, `messageSize "1.5" on line 8: want an integer (bytes)`},
		{"list", "messageSize: [1, 2]", false, "messageSize on line 8: want an integer (bytes), not a list"},
		{"null", "payloadRandomness:", false, "payloadRandomness on line 9: want a number from 0 to 1, not a list, a map or nothing"},
		{"message too small", "messageSize: 15", false, "messageSize 15: allowed: 16 to 1000000 bytes"},
		{"randomness", "payloadRandomness: 1.5", false, "payloadRandomness 1.5: allowed: 0 to 1"},
		{"negative rate", "producerRate: -1", false, "producerRate -1: allowed: 0 (as fast as possible) to 100000000 records/s"},
		{"consumers > partitions", "consumerPerSubscription: 9", false, "consumerPerSubscription 9: allowed: 1 to partitionsPerTopic (8)"},
		{"key distributor", "keyDistributor: ROUND_ROBIN", false, `keyDistributor "ROUND_ROBIN": allowed: NO_KEY, KEY_ROUND_ROBIN, RANDOM_NANO`},
		{"name", "name: a/b", false, `name "a/b": allowed: 1 to 100 letters`},
		{"both durations", "messageCount: 1000", false, "give exactly one of testDurationSeconds (got 1.5) and messageCount (got 1000)"},
		{"backlog with duration", "consumerBacklogSizeGB: 1", false, "testDurationSeconds 1.5: allowed: nothing with consumerBacklogSizeGB"},
		{"zero partitions", "partitionsPerTopic: 0", false, "partitionsPerTopic 0: allowed: 1 to 10000"},
		{"negative replication factor", "replicationFactor: -1", true, "replicationFactor -1: allowed: 0 (the run's default) to 32767"},
		{"replication factor past int16", "replicationFactor: 40000", true, "replicationFactor 40000: allowed: 0 (the run's default) to 32767"},
		{"fractional replication factor", "replicationFactor: 2.5", true, `replicationFactor "2.5" on line 9: want an integer (replicas per partition)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWorkload([]byte(withLine(tc.line, tc.add)), "w.yaml")
			if !errors.Is(err, ErrInvalidWorkload) {
				t.Fatalf("err = %v, want ErrInvalidWorkload", err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "w.yaml") {
				t.Errorf("error %q\nwant it to name the file and say %q", err, tc.want)
			}
		})
	}
	for _, doc := range []string{"", "- a\n- b\n", "topics: [\n"} {
		if _, err := ParseWorkload([]byte(doc), "w.yaml"); !errors.Is(err, ErrInvalidWorkload) {
			t.Errorf("ParseWorkload(%q) = %v, want ErrInvalidWorkload", doc, err)
		}
	}
}

func TestValidateCatchUp(t *testing.T) {
	w, _ := LoadWorkload("catchup-2gb")
	w.WarmupSeconds = 1
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "warmupSeconds 1: allowed: nothing with consumerBacklogSizeGB") {
		t.Errorf("catch-up with a warmup: %v", err)
	}
	w, _ = LoadWorkload("catchup-2gb")
	w.ConsumerBacklogSizeGB = 1e-9 // less than a record per producer
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "at least one record per producer") {
		t.Errorf("tiny backlog: %v", err)
	}
	w, _ = LoadWorkload("max-rate-16p-1kb-4p4c")
	w.TestDurationSeconds, w.MessageCount = 0, 3
	if err := w.Validate(); err == nil || !strings.Contains(err.Error(), "at least one record per producer (4)") {
		t.Errorf("messageCount below the producers: %v", err)
	}
}
