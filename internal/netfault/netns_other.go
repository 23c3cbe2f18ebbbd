//go:build !linux

package netfault

import "errors"

// Networks need Linux's network namespaces; Available and New refuse
// them elsewhere before any of these is reached.
var errNoNamespaces = errors.New("network namespaces need Linux")

func inNamespace(string, func() error) error  { return errNoNamespaces }
func lockNetworks() (func(), error)           { return nil, errNoNamespaces }
func processAlive(int) bool                   { return true }
func openDelayLine(string) (delayLine, error) { return nil, errNoNamespaces }
