// Package clustertest holds the acceptance tests of the cluster work
// (issues 13 to 15) that need several real `fjord serve` processes and
// real faults between them: SIGSTOP and SIGCONT of a follower, the ISR
// shrinking and growing through AlterPartition, min.insync.replicas
// refusing writes. The processes come from internal/testcluster; the
// package has no code of its own outside its tests.
package clustertest
