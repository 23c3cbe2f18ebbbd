package testcluster

import "github.com/fjordmq/fjord/internal/freeport"

// freePorts returns n distinct ports on 127.0.0.1 that were free a moment
// ago, outside the kernel's ephemeral range (internal/freeport says why),
// never the same port twice in one process.
func freePorts(n int) ([]int, error) { return freeport.Take("127.0.0.1", n) }
