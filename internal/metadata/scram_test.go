package metadata

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func scramBase(t *testing.T) *Image {
	t.Helper()
	img, err := baseImage(t).Apply(11, MetadataVersionRecord{Version: ScramMetadataVersion})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// scramRecord is a valid credential record for user and mechanism, its
// bytes filled with fill so tests can tell credentials apart.
func scramRecord(user, mechanism string, fill byte) ScramCredentialRecord {
	n := ScramKeyBytes(mechanism)
	return ScramCredentialRecord{
		User: user, Mechanism: mechanism, Iterations: MinScramIterations,
		Salt:      bytes.Repeat([]byte{fill}, 24),
		StoredKey: bytes.Repeat([]byte{fill + 1}, n),
		ServerKey: bytes.Repeat([]byte{fill + 2}, n),
	}
}

// Kafka's mechanism numbers (ScramMechanism: 0 UNKNOWN, 1, 2), both
// ways.
func TestScramMechanismNumbers(t *testing.T) {
	for typ, want := range map[int8]string{1: ScramSHA256, 2: ScramSHA512} {
		if got, ok := ScramMechanismName(typ); !ok || got != want {
			t.Errorf("ScramMechanismName(%d) = %q, %v; want %q", typ, got, ok, want)
		}
		if got := ScramMechanismType(want); got != typ {
			t.Errorf("ScramMechanismType(%s) = %d, want %d", want, got, typ)
		}
	}
	for _, typ := range []int8{0, 3, -1, 127} {
		if _, ok := ScramMechanismName(typ); ok {
			t.Errorf("ScramMechanismName(%d) is a mechanism", typ)
		}
	}
	for _, name := range []string{"", "PLAIN", "scram-sha-256", "SCRAM-SHA-1"} {
		if got := ScramMechanismType(name); got != 0 {
			t.Errorf("ScramMechanismType(%q) = %d, want 0", name, got)
		}
	}
}

// Each rule of a credential, at and past its bounds, with the Kafka
// error it is answered with.
func TestValidateScramCredential(t *testing.T) {
	for _, user := range []string{"a", "alice", "User:x,y=z", "émile", strings.Repeat("u", MaxScramUserBytes)} {
		if err := ValidateScramUser(user); err != nil {
			t.Errorf("user %.20q: %v", user, err)
		}
	}
	for _, c := range []struct {
		user, msg string
	}{
		{"", "empty"},
		{strings.Repeat("u", MaxScramUserBytes+1), "1025 bytes (at most 1024)"},
		{"\xff\xfe", "UTF-8"},
	} {
		if err := ValidateScramUser(c.user); !errors.Is(err, ErrUnacceptableCredential) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("user %.20q: %v, want UNACCEPTABLE_CREDENTIAL saying %q", c.user, err, c.msg)
		}
	}

	good := scramRecord("alice", ScramSHA512, 1).credential()
	for _, c := range []ScramCredential{
		good,
		scramRecord("alice", ScramSHA256, 1).credential(),
		func() ScramCredential { c := good; c.Iterations = MaxScramIterations; return c }(),
		func() ScramCredential { c := good; c.Salt = []byte{0}; return c }(),
		func() ScramCredential { c := good; c.Salt = make([]byte, MaxScramSaltBytes); return c }(),
	} {
		if err := ValidateScramCredential(c); err != nil {
			t.Errorf("%v salt %d bytes: %v", c, len(c.Salt), err)
		}
	}
	for _, c := range []struct {
		change func(*ScramCredential)
		want   error
		msg    string
	}{
		{func(c *ScramCredential) { c.Mechanism = "PLAIN" }, ErrUnsupportedScramMechanism, `"PLAIN" is not a SCRAM mechanism`},
		{func(c *ScramCredential) { c.Mechanism = "" }, ErrUnsupportedScramMechanism, "not a SCRAM mechanism"},
		{func(c *ScramCredential) { c.Iterations = MinScramIterations - 1 }, ErrUnacceptableCredential, "too few iterations: 4095"},
		{func(c *ScramCredential) { c.Iterations = -1 }, ErrUnacceptableCredential, "too few iterations"},
		{func(c *ScramCredential) { c.Iterations = MaxScramIterations + 1 }, ErrUnacceptableCredential, "too many iterations: 16385"},
		{func(c *ScramCredential) { c.Salt = nil }, ErrUnacceptableCredential, "salt is empty"},
		{func(c *ScramCredential) { c.Salt = make([]byte, MaxScramSaltBytes+1) }, ErrUnacceptableCredential, "salt of 257 bytes"},
		{func(c *ScramCredential) { c.StoredKey = c.StoredKey[:32] }, ErrUnacceptableCredential, "keys of 32 and 64 bytes (want 64)"},
		{func(c *ScramCredential) { c.ServerKey = nil }, ErrUnacceptableCredential, "keys of 64 and 0 bytes"},
		// A SHA-256 credential with SHA-512's keys.
		{func(c *ScramCredential) { c.Mechanism = ScramSHA256 }, ErrUnacceptableCredential, "SCRAM-SHA-256 keys of 64 and 64 bytes (want 32)"},
	} {
		cred := good
		c.change(&cred)
		if err := ValidateScramCredential(cred); !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: %v, want %v saying %q", cred, err, c.want, c.msg)
		}
	}
}

// Reference: KIP-554. ScramCredentialRecord and
// RemoveScramCredentialRecord, from metadata version 10: a user gets a
// credential per mechanism, a new one replaces the old, a removal of the
// last forgets the user, the image before is untouched, a snapshot keeps
// them byte for byte, and a record no controller writes is refused.
func TestApplyScramCredential(t *testing.T) {
	alice256, alice512 := scramRecord("alice", ScramSHA256, 1), scramRecord("alice", ScramSHA512, 2)
	if _, err := quotaBase(t).Apply(12, alice512); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "metadata version 10") {
		t.Fatalf("credential in an older log: %v, want ErrBadRecord naming version 10", err)
	}
	base := scramBase(t)
	set, err := base.Apply(12, alice256, &alice512, scramRecord("bob", ScramSHA512, 3))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := set.ScramCredential("alice", ScramSHA512)
	if !ok || !reflect.DeepEqual(c, alice512.credential()) || len(set.ScramCredentials) != 2 || len(set.ScramCredentials["alice"]) != 2 {
		t.Fatalf("after setting: %v", set.ScramCredentials)
	}
	if _, ok := set.ScramCredential("carol", ScramSHA512); ok {
		t.Fatal("a user without credentials has one")
	}
	if _, ok := set.ScramCredential("bob", ScramSHA256); ok {
		t.Fatal("bob has a SCRAM-SHA-256 credential he was never given")
	}
	if base.ScramCredentials != nil {
		t.Fatal("applying changed the image before")
	}
	// The image owns its bytes: a record reused by its writer does not
	// reach into it.
	alice512.StoredKey[0] ^= 0xff
	if c, _ := set.ScramCredential("alice", ScramSHA512); c.StoredKey[0] != 3 {
		t.Fatal("the image shares the record's key bytes")
	}
	alice512.StoredKey[0] ^= 0xff

	got, b := roundTrip(t, set)
	if c, _ := got.ScramCredential("bob", ScramSHA512); !reflect.DeepEqual(c, scramRecord("bob", ScramSHA512, 3).credential()) {
		t.Fatalf("snapshot lost bob's credential: %v\n%s", got.ScramCredentials, b)
	}

	// Replacing keeps the other mechanism.
	replaced, err := set.Apply(13, scramRecord("alice", ScramSHA512, 7))
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := replaced.ScramCredential("alice", ScramSHA512); c.Salt[0] != 7 || len(replaced.ScramCredentials["alice"]) != 2 {
		t.Fatalf("after replacing: %v", replaced.ScramCredentials["alice"])
	}
	if c, _ := set.ScramCredential("alice", ScramSHA512); c.Salt[0] != 2 {
		t.Fatal("replacing changed the image before")
	}
	// Removing one mechanism, then the last: the user is forgotten.
	one, err := replaced.Apply(14, RemoveScramCredentialRecord{User: "alice", Mechanism: ScramSHA256})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := one.ScramCredential("alice", ScramSHA256); ok || len(one.ScramCredentials["alice"]) != 1 {
		t.Fatalf("after removing one: %v", one.ScramCredentials)
	}
	if _, ok := replaced.ScramCredential("alice", ScramSHA256); !ok {
		t.Fatal("removing changed the image before")
	}
	none, err := one.Apply(15, &RemoveScramCredentialRecord{User: "alice", Mechanism: ScramSHA512}, RemoveScramCredentialRecord{User: "bob", Mechanism: ScramSHA512})
	if err != nil {
		t.Fatal(err)
	}
	if none.ScramCredentials != nil {
		t.Fatalf("users without credentials are kept: %v", none.ScramCredentials)
	}
	roundTrip(t, none)

	bad := func(change func(*ScramCredentialRecord)) ScramCredentialRecord {
		r := scramRecord("carol", ScramSHA256, 9)
		change(&r)
		return r
	}
	for _, c := range []struct {
		rec Record
		msg string
	}{
		{bad(func(r *ScramCredentialRecord) { r.User = "" }), "user name is empty"},
		{bad(func(r *ScramCredentialRecord) { r.User = strings.Repeat("x", MaxScramUserBytes+1) }), "at most 1024"},
		{bad(func(r *ScramCredentialRecord) { r.Mechanism = "SCRAM-SHA-1" }), "not a SCRAM mechanism"},
		{bad(func(r *ScramCredentialRecord) { r.Iterations = 0 }), "too few iterations"},
		{bad(func(r *ScramCredentialRecord) { r.Salt = nil }), "salt is empty"},
		{bad(func(r *ScramCredentialRecord) { r.ServerKey = append(r.ServerKey, 0) }), "keys of 32 and 33 bytes"},
		{RemoveScramCredentialRecord{User: "bob", Mechanism: ScramSHA256}, `"bob" has no SCRAM-SHA-256 credential`},
		{RemoveScramCredentialRecord{User: "nobody", Mechanism: ScramSHA512}, `"nobody" has no SCRAM-SHA-512 credential`},
		{RemoveScramCredentialRecord{User: "bob", Mechanism: "PLAIN"}, "not a SCRAM mechanism"},
		{(*ScramCredentialRecord)(nil), "nil"},
		{(*RemoveScramCredentialRecord)(nil), "nil"},
	} {
		if _, err := set.Apply(13, c.rec); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: %v, want ErrBadRecord saying %q", c.rec, err, c.msg)
		}
	}
	// A batch is applied whole or not at all.
	if _, err := set.Apply(13, scramRecord("carol", ScramSHA256, 1), RemoveScramCredentialRecord{User: "carol", Mechanism: ScramSHA512}); !errors.Is(err, ErrBadRecord) {
		t.Fatalf("a batch with a bad removal: %v", err)
	}
	// A removal after the upsert in the same batch sees it.
	if next, err := set.Apply(13, scramRecord("carol", ScramSHA256, 1), RemoveScramCredentialRecord{User: "carol", Mechanism: ScramSHA256}); err != nil || len(next.ScramCredentials) != 2 {
		t.Fatalf("add and remove in one batch: %v, %v", err, next)
	}
}

// Both record kinds encode and decode as the others do, by value and by
// pointer, and a credential's bytes survive the JSON.
func TestEncodeDecodeScramRecords(t *testing.T) {
	add := scramRecord("alice", ScramSHA512, 0xfe)
	for _, r := range []Record{add, RemoveScramCredentialRecord{User: "alice", Mechanism: ScramSHA256}} {
		b, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("round trip of %s: %v, %v", b, got, err)
		}
		var pb []byte
		switch v := r.(type) {
		case ScramCredentialRecord:
			pb, err = Encode(&v)
		case RemoveScramCredentialRecord:
			pb, err = Encode(&v)
		}
		if err != nil || !bytes.Equal(pb, b) {
			t.Fatalf("Encode(&%T) = %s, %v; want %s", r, pb, err, b)
		}
	}
	b, _ := Encode(RemoveScramCredentialRecord{User: "alice", Mechanism: ScramSHA256})
	if want := `{"type":"remove_scram_credential","data":{"user":"alice","mechanism":"SCRAM-SHA-256"}}`; string(b) != want {
		t.Fatalf("Encode = %s\nwant     %s", b, want)
	}
	batch, err := EncodeBatch([]Record{add, add})
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := DecodeBatch(batch); err != nil || len(recs) != 2 || !reflect.DeepEqual(recs[1], add) {
		t.Fatalf("batch: %v, %v", recs, err)
	}
}

// What a log or a test failure prints of a credential, a record or an
// image names the mechanism and iterations, never the salt or the keys.
func TestScramCredentialPrintsNoSecrets(t *testing.T) {
	r := ScramCredentialRecord{User: "alice", Mechanism: ScramSHA256, Iterations: 8192,
		Salt: []byte("SALTSALTSALT"), StoredKey: bytes.Repeat([]byte("K"), 32), ServerKey: bytes.Repeat([]byte("S"), 32)}
	img, err := scramBase(t).Apply(12, r)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := img.ScramCredential("alice", ScramSHA256)
	for _, s := range []string{
		fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c),
		fmt.Sprint(r), fmt.Sprintf("%+v", r), fmt.Sprintf("%#v", r), fmt.Sprintf("%v", []Record{r}),
		fmt.Sprintf("%+v", img.ScramCredentials), fmt.Sprintf("%+v", *img),
	} {
		if !strings.Contains(s, "SCRAM-SHA-256") || !strings.Contains(s, "8192") {
			t.Errorf("%s: does not name the mechanism and iterations", s)
		}
		for _, secret := range [][]byte{r.Salt, r.StoredKey, r.ServerKey} {
			if strings.Contains(s, string(secret)) || strings.Contains(s, fmt.Sprint(secret)) {
				t.Errorf("%s: shows a secret", s)
			}
		}
	}
}

// The users with credentials are bounded; a user who has one may still
// get another mechanism's.
func TestScramUsersBounded(t *testing.T) {
	img := scramBase(t)
	recs := make([]Record, 0, MaxScramUsers)
	for i := range MaxScramUsers {
		recs = append(recs, scramRecord("user-"+strconv.Itoa(i), ScramSHA256, 1))
	}
	full, err := img.Apply(12, recs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := full.Apply(13, scramRecord("one-more", ScramSHA256, 1)); !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), "at most 100000") {
		t.Fatalf("one user past the bound: %v", err)
	}
	if _, err := full.Apply(13, scramRecord("user-7", ScramSHA512, 1)); err != nil {
		t.Fatalf("a second mechanism for a user at the bound: %v", err)
	}
}

// TestScramProperties: on random sequences of credential records over a
// few users, Apply never panics; a refused batch wraps ErrBadRecord and
// leaves the image as it was; an accepted one gives exactly the
// credentials a plain map model holds (a record's upsert replaces, a
// removal of what exists removes, anything else is refused); every
// credential in an image passes ValidateScramCredential under a valid
// user; and every image survives a snapshot unchanged.
func TestScramProperties(t *testing.T) {
	users := []string{"alice", "bob", "carol,=x", "alice", "bob", ""}
	mechanisms := []string{ScramSHA256, ScramSHA512, ScramSHA256, ScramSHA512, "PLAIN"}
	rapid.Check(t, func(t *rapid.T) {
		img, err := Empty(testConfigs).Apply(1, ClusterIDRecord{ClusterID: "c"}, MetadataVersionRecord{Version: ScramMetadataVersion})
		if err != nil {
			t.Fatal(err)
		}
		model := map[string]map[string]ScramCredential{}
		for batch := range rapid.IntRange(1, 20).Draw(t, "batches") {
			next := cloneModel(model)
			var recs []Record
			valid := true
			for range rapid.IntRange(1, 3).Draw(t, "records") {
				user := rapid.SampledFrom(users).Draw(t, "user")
				mech := rapid.SampledFrom(mechanisms).Draw(t, "mechanism")
				if rapid.IntRange(0, 2).Draw(t, "remove") == 0 {
					recs = append(recs, RemoveScramCredentialRecord{User: user, Mechanism: mech})
					if _, ok := next[user][mech]; !ok {
						valid = false
						continue
					}
					delete(next[user], mech)
					if len(next[user]) == 0 {
						delete(next, user)
					}
					continue
				}
				// Mostly good fields, so that a good share of the
				// batches are accepted; each may be bad on its own.
				keyBytes := ScramKeyBytes(mech)
				if rapid.IntRange(0, 9).Draw(t, "badKeys") == 0 {
					keyBytes = rapid.SampledFrom([]int{0, 31, 32, 64, 65}).Draw(t, "keyBytes")
				}
				iterations := rapid.Int32Range(MinScramIterations, MaxScramIterations).Draw(t, "iterations")
				if rapid.IntRange(0, 9).Draw(t, "badIterations") == 0 {
					iterations = rapid.SampledFrom([]int32{0, -1, MinScramIterations - 1, MaxScramIterations + 1}).Draw(t, "iterations")
				}
				r := ScramCredentialRecord{
					User: user, Mechanism: mech, Iterations: iterations,
					Salt:      rapid.SliceOfN(rapid.Byte(), 0, 4).Draw(t, "salt"),
					StoredKey: rapid.SliceOfN(rapid.Byte(), keyBytes, keyBytes).Draw(t, "storedKey"),
					ServerKey: rapid.SliceOfN(rapid.Byte(), keyBytes, keyBytes).Draw(t, "serverKey"),
				}
				recs = append(recs, r)
				if ValidateScramUser(user) != nil || ValidateScramCredential(r.credential()) != nil {
					valid = false
					continue
				}
				if next[user] == nil {
					next[user] = map[string]ScramCredential{}
				}
				next[user][mech] = r.credential()
			}
			before, _ := EncodeImage(img)
			got, err := img.Apply(uint64(batch)+2, recs...)
			if after, _ := EncodeImage(img); !bytes.Equal(before, after) {
				t.Fatalf("Apply changed the image before")
			}
			if (err == nil) != valid {
				t.Fatalf("%v: error %v, the model says valid=%v", recs, err, valid)
			}
			if err != nil {
				if !errors.Is(err, ErrBadRecord) {
					t.Fatalf("error %v does not wrap ErrBadRecord", err)
				}
				continue
			}
			model, img = next, got
			if len(model) == 0 && img.ScramCredentials != nil || len(model) > 0 && !reflect.DeepEqual(img.ScramCredentials, model) {
				t.Fatalf("image holds %v, the model %v", img.ScramCredentials, model)
			}
			for user, creds := range img.ScramCredentials {
				if ValidateScramUser(user) != nil || len(creds) == 0 {
					t.Fatalf("user %q with %d credentials", user, len(creds))
				}
				for m, c := range creds {
					if c.Mechanism != m || ValidateScramCredential(c) != nil {
						t.Fatalf("user %q: %s under %s", user, c, m)
					}
				}
			}
			checkSnapshot(t, img)
		}
	})
}

func cloneModel(m map[string]map[string]ScramCredential) map[string]map[string]ScramCredential {
	out := make(map[string]map[string]ScramCredential, len(m))
	for u, creds := range m {
		out[u] = maps.Clone(creds)
	}
	return out
}

// FuzzScramCredentialRecord feeds arbitrary fields to a
// ScramCredentialRecord. Invariants: Apply never panics; it accepts the
// record exactly when ValidateScramUser and ValidateScramCredential do
// (refusing with ErrBadRecord otherwise); an accepted credential is read
// back byte for byte by ScramCredential, survives Encode/Decode and a
// snapshot, and its removal leaves no user behind.
func FuzzScramCredentialRecord(f *testing.F) {
	valid := scramRecord("alice", ScramSHA512, 1)
	f.Add(valid.User, valid.Mechanism, valid.Salt, valid.StoredKey, valid.ServerKey, valid.Iterations)
	f.Add("", "", []byte{}, []byte{}, []byte{}, int32(0))
	f.Add(strings.Repeat("u", MaxScramUserBytes), ScramSHA256, make([]byte, MaxScramSaltBytes), make([]byte, 32), make([]byte, 32), int32(MaxScramIterations))
	f.Add(strings.Repeat("u", MaxScramUserBytes+1), ScramSHA256, make([]byte, MaxScramSaltBytes+1), make([]byte, 33), make([]byte, 31), int32(MaxScramIterations+1))
	f.Add("\xff", "SCRAM-SHA-1", []byte{1}, make([]byte, 20), make([]byte, 20), int32(-1))
	f.Add("a,b=c", ScramSHA256, append(valid.Salt, "garbage"...), make([]byte, 32), make([]byte, 32), int32(MinScramIterations))
	img, err := Empty(testConfigs).Apply(1, ClusterIDRecord{ClusterID: "c"}, MetadataVersionRecord{Version: ScramMetadataVersion})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, user, mechanism string, salt, storedKey, serverKey []byte, iterations int32) {
		r := ScramCredentialRecord{User: user, Mechanism: mechanism, Salt: salt, StoredKey: storedKey, ServerKey: serverKey, Iterations: iterations}
		want := ValidateScramUser(user) == nil && ValidateScramCredential(r.credential()) == nil
		next, err := img.Apply(2, r)
		if (err == nil) != want {
			t.Fatalf("Apply: %v; the validators say valid=%v", err, want)
		}
		if err != nil {
			if !errors.Is(err, ErrBadRecord) {
				t.Fatalf("error %v does not wrap ErrBadRecord", err)
			}
			return
		}
		c, ok := next.ScramCredential(user, mechanism)
		if !ok || !bytes.Equal(c.Salt, salt) || !bytes.Equal(c.StoredKey, storedKey) || !bytes.Equal(c.ServerKey, serverKey) || c.Iterations != iterations {
			t.Fatalf("read back %v, %v", c, ok)
		}
		b, err := Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := Decode(b); err != nil || !reflect.DeepEqual(back.(ScramCredentialRecord).credential(), c) {
			t.Fatalf("record round trip: %v, %v", back, err)
		}
		snap, err := EncodeImage(next)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := DecodeImage(snap, testConfigs); err != nil || !reflect.DeepEqual(back, next) {
			t.Fatalf("snapshot round trip: %v", err)
		}
		gone, err := next.Apply(3, RemoveScramCredentialRecord{User: user, Mechanism: mechanism})
		if err != nil || gone.ScramCredentials != nil || !slices.Equal(slices.Collect(maps.Keys(next.ScramCredentials)), []string{user}) {
			t.Fatalf("removal: %v, left %v", err, gone)
		}
	})
}
