package metadata

import (
	"fmt"

	"github.com/fjordmq/fjord/internal/acl"
)

// ACL bindings (CreateAcls, DeleteAcls; issue 20, slice 3), kept in the
// metadata log so every node authorizes by the same ones from its own
// image (Image.ACLs; internal/acl holds the semantics).
//
// A binding is its own identity (acl.Binding's doc): ACLRecord adds one,
// RemoveACLRecord removes the one with exactly the same fields. Kafka's
// AccessControlEntryRecord carries a random id besides; Fjord's records
// need none, since the controller never writes the same binding twice
// (CreateAcls answers an existing one with success and writes nothing).
//
// Invariants (Apply refuses a record that breaks one):
//   - every binding in an image passes acl.Validate;
//   - a binding is added only when absent and removed only when present,
//     so replaying the log never hides a controller's mistake;
//   - at most MaxACLs bindings;
//   - Image.ACLs is nil when there is none, so images compare (and
//     snapshots round-trip) the same however they got there.
//
// An image's Set is never modified: a batch builds the next one with one
// acl.Builder (copy-on-write, sharing what the batch did not touch), made
// on the batch's first ACL record and turned into a Set when the batch
// ends, so a batch of a thousand bindings builds one Set, not a thousand.

// ACLMetadataVersion is the first metadata version with ACLRecord and
// RemoveACLRecord.
const ACLMetadataVersion int32 = 11

// MaxACLs bounds the bindings of an image, as MaxScramUsers bounds the
// users: every node keeps them all in memory, indexed, and in every
// snapshot. Kafka has no bound; clusters with tens of thousands of
// bindings are large ones.
const MaxACLs = 100_000

// ACLRecord adds one ACL binding (Kafka's AccessControlEntryRecord,
// without its id). The four enums are the wire's codes (kmsg's, which
// internal/acl uses unchanged), kept as plain numbers: kmsg's types
// would encode as names, and a name a later kmsg spells differently, or
// a code it does not know ("UNKNOWN"), would not decode to the same
// binding.
type ACLRecord struct {
	ResourceType int8   `json:"resource_type"`
	ResourceName string `json:"resource_name"`
	PatternType  int8   `json:"pattern_type"`
	Principal    string `json:"principal"`
	Host         string `json:"host"`
	Operation    int8   `json:"operation"`
	Permission   int8   `json:"permission"`
}

// RemoveACLRecord removes one ACL binding (Kafka's
// RemoveAccessControlEntryRecord), named by all its fields.
//
// A record kind of its own rather than a Remove flag on ACLRecord, as
// RemoveScramCredentialRecord is: each record then means one thing
// whichever fields a reader looks at. It has ACLRecord's fields (a
// conversion between the two is free).
type RemoveACLRecord ACLRecord

// NewACLRecord is the record that adds b.
func NewACLRecord(b acl.Binding) ACLRecord {
	return ACLRecord{
		ResourceType: int8(b.Pattern.Type),
		ResourceName: b.Pattern.Name,
		PatternType:  int8(b.Pattern.PatternType),
		Principal:    b.Entry.Principal,
		Host:         b.Entry.Host,
		Operation:    int8(b.Entry.Operation),
		Permission:   int8(b.Entry.Permission),
	}
}

// NewRemoveACLRecord is the record that removes b.
func NewRemoveACLRecord(b acl.Binding) RemoveACLRecord { return RemoveACLRecord(NewACLRecord(b)) }

// Binding is the binding r adds.
func (r ACLRecord) Binding() acl.Binding {
	return acl.Binding{
		Pattern: acl.ResourcePattern{Type: acl.ResourceType(r.ResourceType), Name: r.ResourceName, PatternType: acl.PatternType(r.PatternType)},
		Entry:   acl.Entry{Principal: r.Principal, Host: r.Host, Operation: acl.Operation(r.Operation), Permission: acl.Permission(r.Permission)},
	}
}

// Binding is the binding r removes.
func (r RemoveACLRecord) Binding() acl.Binding { return ACLRecord(r).Binding() }

// aclForMessage prints b for an error, its strings cut (a record's
// fields are bounded only once acl.Validate has accepted them).
func aclForMessage(b acl.Binding) string {
	b.Pattern.Name = shortForMessage(b.Pattern.Name)
	b.Entry.Principal = shortForMessage(b.Entry.Principal)
	b.Entry.Host = shortForMessage(b.Entry.Host)
	return b.String()
}

// addACL applies an ACLRecord.
func (d *draft) addACL(r ACLRecord) error {
	if err := d.requireVersion(ACLMetadataVersion, "ACL bindings"); err != nil {
		return err
	}
	b := r.Binding()
	if err := acl.Validate(b); err != nil {
		return fmt.Errorf("binding %s: %w", aclForMessage(b), err)
	}
	bld := d.aclBuilder()
	if d.aclCount >= MaxACLs {
		// Checked before Add, whether or not b is there: a duplicate is
		// refused either way.
		return fmt.Errorf("binding %s: %d ACL bindings exist already (at most %d)", aclForMessage(b), d.aclCount, MaxACLs)
	}
	added, err := bld.Add(b)
	switch {
	case err != nil:
		// Validate accepted it above; Add validates the same way.
		return fmt.Errorf("binding %s: %w", aclForMessage(b), err)
	case !added:
		return fmt.Errorf("binding %s exists already", aclForMessage(b))
	}
	d.aclCount++
	return nil
}

// removeACL applies a RemoveACLRecord.
func (d *draft) removeACL(r RemoveACLRecord) error {
	if err := d.requireVersion(ACLMetadataVersion, "ACL bindings"); err != nil {
		return err
	}
	b := r.Binding()
	if !d.aclBuilder().Remove(b) {
		return fmt.Errorf("binding %s does not exist", aclForMessage(b))
	}
	d.aclCount--
	return nil
}

// aclBuilder returns the batch's Builder, started from the image's Set
// on first use.
func (d *draft) aclBuilder() *acl.Builder {
	if d.acls == nil {
		d.acls = d.next.ACLs.Builder()
		d.aclCount = d.next.ACLs.Len()
	}
	return d.acls
}

// finishACLs makes the batch's Builder the next image's Set (nil when it
// holds none). Until then d.next.ACLs is the image's, untouched.
func (d *draft) finishACLs() {
	if d.acls == nil {
		return
	}
	set := d.acls.Set()
	d.acls = nil
	if set.Len() == 0 {
		set = nil
	}
	d.next.ACLs = set
}

// aclRecords lists set's bindings as records, in acl.Set.Bindings order
// (resource type, pattern type, name, entry), for a snapshot.
func aclRecords(set *acl.Set) []ACLRecord {
	bindings := set.Bindings()
	if len(bindings) == 0 {
		return nil
	}
	out := make([]ACLRecord, len(bindings))
	for i, b := range bindings {
		out[i] = NewACLRecord(b)
	}
	return out
}

func (ACLRecord) Type() string       { return "acl" }
func (RemoveACLRecord) Type() string { return "remove_acl" }
