package controlplane

import "github.com/fjordmq/fjord/internal/metadata"

// QuotaAlteration is one entity's change in an AlterClientQuotas
// request (KIP-546): keys to set and keys to remove.
type QuotaAlteration struct {
	Entity metadata.QuotaEntity
	Ops    []QuotaOp
}

// QuotaOp sets Key to Value, or removes Key.
type QuotaOp struct {
	Key    string
	Value  float64
	Remove bool
}
