//go:build race

package httpapi_test

// longPolls under the race detector, which makes every goroutine several
// times slower: 10,000 connections on two cores then starve the node's
// HTTP server past its 10 s ReadHeaderTimeout, and it closes connections
// whose requests it never got to read, which the storm counts as
// transport errors. The race run is there for data races in the pools'
// and handlers' bookkeeping, which a storm of 3,000 (still ten times the
// read pool) exercises the same way; the 10,000 runs in the
// ordinary run of the suite.
const longPolls = 3_000
