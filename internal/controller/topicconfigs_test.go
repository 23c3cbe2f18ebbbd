package controller

import (
	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/replica"
	"github.com/fjordmq/fjord/internal/storage"
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// testConfigs is the table node hands the controller (Config.TopicConfigs).
// Only the tests import replica; the controller itself never does.
var testConfigs = topicconfig.New(storage.TopicConfigs(), replica.TopicConfigs(), TopicConfigs(), metadata.KafkaTopicConfigs())

// TestConfigs is testConfigs for the external tests (package controller_test).
var TestConfigs = testConfigs
