package replica_test

import (
	"github.com/fjordmq/fjord/internal/kafkaserver"
	"github.com/fjordmq/fjord/internal/replica"
)

// The replica manager is what kafkaserver's data handlers call. replica
// must not import kafkaserver (it sits below it), so the check lives here.
var _ kafkaserver.Replicas = (*replica.Manager)(nil)
