package metadata

import (
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// testConfigs stands in for the node's topic-config table in this
// package's tests: storage's definitions and KafkaTopicConfigs, as they
// are. It lacks the replica manager's min.insync.replicas (metadata
// cannot import replica, which imports metadata); node's tests check the
// real table whole.
var testConfigs = topicconfig.New(storage.TopicConfigs(), KafkaTopicConfigs())

// testImage answers the table's lookups in tests.
var testImage = Empty(testConfigs)
