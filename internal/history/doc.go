// Package history holds what a workload did to a cluster and checks it
// against Fjord's guarantees: producers report each record they send and
// each acknowledgement (Checker.Sent, Checker.Acked); after the faults,
// ReadAll reads every partition back from its log start to its high
// watermark, and Checker.Verify finds what was lost, duplicated,
// reordered, or written without being sent.
//
// It imports no test package: the cluster tests (testcluster,
// clustertest) use it today, and `fjord verify` (issue 16) is built on
// it, so a user checks their own cluster with the checker Fjord's own
// tests use.
package history
