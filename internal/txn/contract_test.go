package txn_test

import (
	"github.com/fjordmq/fjord/internal/kafkaserver"
	"github.com/fjordmq/fjord/internal/txn"
)

// The protocol server calls producer ids through its own interface; the
// assertion lives in an external test package so txn never imports
// kafkaserver (imports point down).
var _ kafkaserver.ProducerIDs = (*txn.ProducerIDManager)(nil)
