package kafkaserver

// groupAPIs: consumer groups, served by the group coordinator
// (internal/group) behind the Groups interface. JoinGroup keeps v0-1
// (kafka-go, kafka_ex; see KAFKA-API.md); OffsetCommit and OffsetFetch
// stop at v9, before topic ids (v10).
var groupAPIs = []api{
	{key: 10, minVersion: 0, maxVersion: 6, handle: handleFindCoordinator},
	{key: 11, minVersion: 0, maxVersion: 9, handle: handleJoinGroup},
	{key: 14, minVersion: 0, maxVersion: 5, handle: handleSyncGroup},
	{key: 12, minVersion: 0, maxVersion: 4, handle: handleHeartbeat},
	{key: 13, minVersion: 0, maxVersion: 5, handle: handleLeaveGroup},
	{key: 8, minVersion: 0, maxVersion: 9, handle: handleOffsetCommit},
	{key: 9, minVersion: 0, maxVersion: 9, handle: handleOffsetFetch},
	{key: 15, minVersion: 0, maxVersion: 5, handle: handleDescribeGroups},
	{key: 16, minVersion: 0, maxVersion: 5, handle: handleListGroups},
	{key: 42, minVersion: 0, maxVersion: 2, handle: handleDeleteGroups},
	{key: 47, minVersion: 0, maxVersion: 0, handle: handleOffsetDelete},
}
