package group

import "testing"

// Reference: Kafka's GroupMetadataManager.partitionFor,
// Utils.abs(groupId.hashCode) % groupMetadataTopicPartitionCount. The
// hashes are java.lang.String.hashCode's.
func TestPartitionForMatchesJava(t *testing.T) {
	for _, tc := range []struct {
		group      string
		hash       int32 // Java's "group".hashCode()
		partitions int32
		want       int32
	}{
		{"", 0, 50, 0},
		{"a", 97, 50, 47},
		{"hello", 99162322, 50, 22},
		// Java's hashCode of this string is Integer.MIN_VALUE; Kafka's
		// Utils.abs maps it to 0, where Math.abs would stay negative.
		{"polygenelubricants", -2147483648, 50, 0},
		// Negative hashes take Math.abs: 1906497762 % 50 = 12. Masking
		// the sign bit would give 36.
		{"my-group", -1906497762, 50, 12},
		{"billing", -109829509, 50, 9},
		// A supplementary character hashes as its two UTF-16 surrogates
		// (0xD83D, 0xDE00): 0xD83D*31 + 0xDE00.
		{"\U0001F600", 1772899, 50, 49},
		{"hello", 99162322, 1, 0},
	} {
		if got := javaStringHashCode(tc.group); got != tc.hash {
			t.Errorf("hashCode(%q) = %d, want %d", tc.group, got, tc.hash)
		}
		if got := PartitionFor(tc.group, tc.partitions); got != tc.want {
			t.Errorf("PartitionFor(%q, %d) = %d, want %d", tc.group, tc.partitions, got, tc.want)
		}
	}
}

// javaHashReference is String.hashCode written the way its Javadoc
// states it, over UTF-16 code units, as an independent check.
func javaHashReference(s string) int32 {
	var h int32
	for _, u := range []rune(s) {
		if u >= 0x10000 {
			u -= 0x10000
			h = h*31 + (0xD800 + u>>10)
			h = h*31 + (0xDC00 + u&0x3ff)
			continue
		}
		h = h*31 + u
	}
	return h
}

func TestPartitionForRejectsNoPartitions(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("PartitionFor with 0 partitions did not panic")
		}
	}()
	PartitionFor("g", 0)
}

func FuzzPartitionFor(f *testing.F) {
	for _, s := range []string{"", "a", "polygenelubricants", "\U0001F600", "\xff\xfe"} {
		f.Add(s, int32(50))
	}
	// Invariants: never panics for partitions > 0; the result is in
	// [0, partitions); the hash is Java's.
	f.Fuzz(func(t *testing.T, s string, partitions int32) {
		if partitions <= 0 {
			return
		}
		p := PartitionFor(s, partitions)
		if p < 0 || p >= partitions {
			t.Fatalf("PartitionFor(%q, %d) = %d", s, partitions, p)
		}
		if javaStringHashCode(s) != javaHashReference(s) {
			t.Fatalf("hash of %q differs from the reference", s)
		}
	})
}
