package kafkaserver

import (
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// testConfigs is the table node hands the server (Config.TopicConfigs)
// and the controller's images are built over.
var testConfigs = topicconfig.New(storage.TopicConfigs(), replica.TopicConfigs(), metadata.KafkaTopicConfigs())

// testImage answers the table's lookups in the fakes.
var testImage = metadata.Empty(testConfigs)
