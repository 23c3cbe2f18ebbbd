package kafkaserver

// txnAPIs: transactions, served by the transaction coordinator
// (internal/txn) behind the Transactions interface; each request goes to
// the coordinator of its transactional id (FindCoordinator key type 1),
// which answers NOT_COORDINATOR when that is not this node.
//
// The Transactions V1 path only, for now: EndTxn stops at v4 and
// AddPartitionsToTxn at v3, and the transaction.version feature is not
// advertised, so every client (franz-go and Java decide on that feature)
// keeps one producer epoch per session and adds its partitions itself.
// TxnOffsetCommit goes to the group's coordinator (internal/group), the
// others to the transaction's.
var txnAPIs = []api{
	{key: 24, minVersion: 0, maxVersion: 4, handle: handleAddPartitionsToTxn},
	{key: 25, minVersion: 0, maxVersion: 4, handle: handleAddOffsetsToTxn},
	{key: 28, minVersion: 0, maxVersion: 4, handle: handleTxnOffsetCommit},
	{key: 26, minVersion: 0, maxVersion: 4, handle: handleEndTxn},
	{key: 65, minVersion: 0, maxVersion: 0, handle: handleDescribeTransactions},
	{key: 66, minVersion: 0, maxVersion: 2, handle: handleListTransactions},
}
