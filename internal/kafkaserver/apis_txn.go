package kafkaserver

// txnAPIs: transactions, served by the transaction coordinator
// (internal/txn) behind the Transactions interface; each request goes to
// the coordinator of its transactional id (FindCoordinator key type 1),
// which answers NOT_COORDINATOR when that is not this node.
//
// Both paths of Kafka's transactions are served, chosen per request
// version as Kafka chooses them: Transactions V1 (EndTxn v0-4, clients'
// AddPartitionsToTxn v0-3 and AddOffsetsToTxn, TxnOffsetCommit v0-4:
// one producer epoch per session) for every client, and Transactions V2
// (KIP-890 part 2: EndTxn v5 bumps the epoch at every transaction's end,
// and Produce v12 and TxnOffsetCommit v5 add their partitions
// themselves) for a client that reads the transaction.version feature
// ApiVersions finalizes at 2 (api_versions.go). TxnOffsetCommit goes to
// the group's coordinator (internal/group), the others to the
// transaction's.
var txnAPIs = []api{
	{key: 24, minVersion: 0, maxVersion: 5, handle: handleAddPartitionsToTxn},
	{key: 25, minVersion: 0, maxVersion: 4, handle: handleAddOffsetsToTxn},
	{key: 28, minVersion: 0, maxVersion: 5, handle: handleTxnOffsetCommit},
	{key: 26, minVersion: 0, maxVersion: 5, handle: handleEndTxn},
	{key: 65, minVersion: 0, maxVersion: 0, handle: handleDescribeTransactions},
	{key: 66, minVersion: 0, maxVersion: 2, handle: handleListTransactions},
}
