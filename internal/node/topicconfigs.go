package node

import (
	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// topicConfigs is the node's one table of topic configs, put together
// here because node is the only package that sees every owner: storage's
// log settings, the replica manager's min.insync.replicas, the
// controller's unclean.leader.election.enable, the Kafka configs
// nothing acts on and topic migration's two (metadata). The controller validates with it
// and builds its images over it (controller.Config.TopicConfigs), so
// the image's defaults, DescribeConfigs (kafkaserver.Config.TopicConfigs,
// and the images) and the replica manager (storage's entries) all read
// the same definitions. The controller never imports replica.
var topicConfigs = topicconfig.New(storage.TopicConfigs(), replica.TopicConfigs(), controller.TopicConfigs(), metadata.KafkaTopicConfigs(), metadata.MigrationTopicConfigs())
