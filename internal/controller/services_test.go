package controller_test

import (
	"github.com/fjordmq/fjord/internal/controller"
	"github.com/fjordmq/fjord/internal/kafkaserver"
)

// *Controller is the broker's control plane. The assertion lives in an
// external test package because kafkaserver imports controller.
var _ kafkaserver.Controller = (*controller.Controller)(nil)
