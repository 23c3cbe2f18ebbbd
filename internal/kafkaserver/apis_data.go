package kafkaserver

// dataAPIs: bootstrap and the data path (ApiVersions, Metadata, Produce,
// Fetch, and WriteTxnMarkers, which appends). The ranges are chosen against real clients (each API's file
// says why): every non-flexible version kafkajs and kafka-go stop at is
// kept, Produce is advertised from v0 although only magic-2 batches are
// accepted (librdkafka turns compression off when Produce's minimum is
// above 0), and Fetch starts at v4, the first that carries record
// batches.
var dataAPIs = []api{
	{key: 18, minVersion: 0, maxVersion: 3, handle: handleAPIVersions},
	{key: 3, minVersion: 0, maxVersion: 12, handle: handleMetadata},
	{key: 0, minVersion: 0, maxVersion: 12, handle: handleProduce},
	{key: 1, minVersion: 4, maxVersion: 16, handle: handleFetch},
	{key: 27, minVersion: 0, maxVersion: 2, handle: handleWriteTxnMarkers},
}
