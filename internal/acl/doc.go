// Package acl is Kafka's authorizer as pure decisions: bindings in,
// answers out. No sockets, goroutines, clocks or randomness; the protocol
// layer asks, the metadata image stores.
//
// The nouns are Kafka's (clients' org.apache.kafka.common.acl and
// resource, and the KRaft StandardAuthorizer in
// metadata/.../authorizer):
//
//	Binding  = ResourcePattern{Type, Name, PatternType} + Entry{Principal, Host, Operation, Permission}
//	Filter   = what DescribeAcls and DeleteAcls select bindings by
//	Set      = an immutable, indexed set of bindings (one per metadata image)
//	Builder  = copy-on-write adds and removes from one Set to the next
//	Config   = super.users and allow.everyone.if.no.acl.found (broker config)
//	Authorizer = a Set with a Config: Authorize, Decide, AuthorizeByResourceType
//
// The enums are kmsg's (ACLResourceType, ACLResourcePatternType,
// ACLOperation, ACLPermissionType) under shorter names, so wire values
// pass through unconverted.
//
// Flow: CreateAcls validates each binding (Validate) and the controller
// adds the ones not already there (Builder.Add reports which) to the
// metadata log; DeleteAcls validates each filter (ValidateFilter) and
// removes Set.Matching(filter); every node applies the records to its
// image's Set with a Builder, and pairs the new Set with its Config
// (Authorizer.WithSet). Request handlers then call Authorize per resource.
// APIS.md lists which operation on which resource each Kafka API checks.
//
// Rules that surprise (each is pinned by a test; the Kafka file it comes
// from is named in the doc of the function that implements it):
//   - DESCRIBE is implied by ALLOW on READ, WRITE, DELETE or ALTER, and
//     DESCRIBE_CONFIGS by ALLOW on ALTER_CONFIGS, but a DENY on READ does
//     not deny DESCRIBE. ALL matches every operation, for DENY too.
//   - One binding on a resource, for anyone, turns
//     allow.everyone.if.no.acl.found off for that resource.
//   - Super users are compared as strings: "User:*" in super.users is not
//     a wildcard. super.users is separated by semicolons.
//   - The only wildcard principal is "User:*".
//   - CreateAcls refuses any CLUSTER name but "kafka-cluster", so a
//     LITERAL "*" cluster binding cannot be created.
//   - AuthorizeByResourceType first authorizes a resource literally named
//     "hardcode".
//
// Where Fjord departs from Kafka, on purpose: Validate also refuses
// bindings Kafka stores but that can never match (a host that is not an
// IP address) or that make Kafka throw at authorization (a principal
// without a colon), and over-long or non-UTF-8 strings; and hosts are
// compared as addresses, where Kafka compares strings with Java's
// uncompressed IPv6 form, so that in Kafka an ACL for "::1" never matches.
package acl
