// Package e2e holds Fjord's end-to-end tests: real Kafka clients against
// real `fjord serve` processes over TCP on 127.0.0.1, started, killed and
// restarted by internal/testcluster. Each test starts its own node with
// its own data directory and ports, so the tests run in parallel.
//
// The four client tests (franz-go, Sarama, librdkafka, kcat) run twice,
// as subtests one-node and three-nodes (forEachTarget): the second
// against a cluster of three nodes whose topics have three replicas, so
// acks=all waits for both followers. The three-nodes subtests share one
// cluster, started by the first of them (testcluster.StartSharedCluster)
// and stopped after the last test; each creates topics of its own and
// stops no node, so they do not disturb one another.
//
// Clients: franz-go (kgo, kadm), Sarama (github.com/IBM/sarama),
// librdkafka through confluent-kafka-go (cgo, its bundled static
// librdkafka), and the kcat command from Debian's package.
//
//	TestFranzGoIdempotentKeyed  100,000 keyed records, idempotent, acks=all, 8 partitions (1 and 3 nodes)
//	TestSarama                  SyncProducer + PartitionConsumer, default version and V3_x (1 and 3 nodes)
//	TestLibrdkafkaIdempotent    idempotent producer, assign()ed consumer (1 and 3 nodes)
//	TestKcat                    metadata (-L -J), produce (-P -K:), consume (-C -e) (1 and 3 nodes)
//	TestCompression             gzip, snappy, lz4, zstd from four clients, read back by franz-go
//	TestCrashKeepsAckedRecords  SIGKILL under an acks=all idempotent producer, restart
//	TestLogFailureMovesLeadership an injected EIO on the leader's fsync (FJORD_FSYNC_EIO)
//	                            under acks=all: KAFKA_STORAGE_ERROR, then another leader,
//	                            the failed node out of the ISR, nothing acknowledged lost
//	TestClientQuotas            1 MiB/s producer and consumer quotas on franz-go, Sarama and
//	                            librdkafka at once, held within 10% over 30 s and throttled
//	                            without reconnects, beside unthrottled clients (not parallel:
//	                            it compares latency with a baseline of its own)
//	TestHostileInput            garbage on raw sockets while a good client works
//	TestMetadataSurvivesRestart topics, configs, offsets, deletions across SIGTERM and SIGKILL
//	TestGroupCooperativeSticky  3 franz-go members (one joins late, one leaves, one is SIGKILLed
//	                            in its own process) under 60,000 keyed records; checkCoop
//	                            checks ownership, order, duplicates and rebalance gaps
//	TestGroupSarama             Sarama's consumer group, two versions: all, then nothing old
//	TestGroupLibrdkafka         librdkafka's group consumer, default and cooperative assignors
//	TestGroupStaticMemberRestart static members restarted without a rebalance; old ids fenced
//	TestGroupCommitsSurviveKill committed offsets across SIGKILL and restart, exactly
//	TestTransactionsSarama      transactional SyncProducer, default version and newest 3.x:
//	                            commit, abort, a session fenced between transactions and one
//	                            fenced with its transaction open; read back read_committed and
//	                            read_uncommitted up to an end record per partition (1 and 3 nodes)
//	TestTransactionsLibrdkafka  the same with librdkafka's transactional producer (1 and 3 nodes)
//	TestTLSClients, TestSASLClients  franz-go, Sarama, librdkafka and kcat over mTLS and
//	                            SASL_SSL, and each client's refusals (tls_test.go, sasl_test.go)
//	TestTLSInterBroker, TestSASLInterBroker  3 nodes replicating and failing over on a
//	                            secured inter-broker listener
//	TestSecurityHostileInput    10,000 unauthenticated connections, broken handshakes
//	TestACLs                    3 nodes: a principal with prefixed WRITE on a- and READ on g1
//	                            does exactly that on every API (franz-go, librdkafka), deny
//	                            beats allow, super users pass, changes reach every node
//
// The SIGKILLed group member is this test binary run again with
// FJORD_E2E_COOP_MEMBER set (groups_coopmember_test.go's init).
//
// Running:
//
//	go test ./internal/e2e                  # about 3 minutes on 2 cores (plus building fjord once)
//	FJORD_E2E_LONG=1 go test -timeout 30m ./internal/e2e   # about 2 minutes
//	FJORD_BIN=/path/to/fjord go test ./internal/e2e   # a prebuilt binary
//
// FJORD_E2E_CLIENT_DEBUG=1 sends the transaction tests' client logs to
// stderr: Sarama's Logger and DebugLogger, and librdkafka's
// "eos,protocol,broker" debug log, to see which request a failure came
// from.
//
// FJORD_E2E_LONG=1 makes the runs longer: 1,000,000 records instead of
// 100,000 for franz-go, ten times the records for Sarama and librdkafka,
// five SIGKILL/restart cycles instead of one in the crash test, 2,000
// garbage connections instead of 64 in the hostile-input test, 200,000
// records in the cooperative group test, and three kill cycles in the
// group restart test.
//
// kcat: TestKcat and TestCompression need `kcat` on PATH. When it is
// missing and the test runs as root, the test installs it with
// `apt-get install -y kcat` (running `apt-get update` first if needed);
// otherwise it fails, saying how to install it. It is never skipped.
package e2e
