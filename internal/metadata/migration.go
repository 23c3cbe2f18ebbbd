package metadata

import (
	"github.com/fjordmq/fjord/internal/topicconfig"
)

// Topic migration (`fjord topic migrate`, internal/migrate; DESIGN.md
// section 24) moves a topic's records to a new topic with more
// partitions, keeping each key's order. Two topic configs carry its
// state where every node sees it, in the metadata log:
//
//   - MigratedToConfig on the source, set at cutover: the source takes
//     no more produces (the replica manager refuses them under the
//     partition's lock, so once a leader says it is sealed, its log end
//     is final; replica.ErrTopicMigrated), and the refusal names the
//     destination.
//   - MigratingFromConfig on the destination, from its creation until
//     the cutover has copied the source's last record: produces are
//     refused (retriably) except from the migration's own transactional
//     id, so no producer's record lands in the destination ahead of
//     source records still being copied, which would break key order.
//
// Both are ordinary topic overrides (DescribeConfigs shows them; an
// operator can remove them by hand to undo a stuck migration).
const (
	MigratedToConfig    = "fjord.migrated.to"
	MigratingFromConfig = "fjord.migrating.from"
)

// MigrationTransactionalID is the transactional id the copy of a
// migration from src writes with: the only producer the destination
// accepts before the cutover, and fixed by src so that a restarted
// migration fences the run it replaces (InitProducerId bumps the epoch
// and aborts what the dead run left open).
func MigrationTransactionalID(src string) string {
	return "__fjord_migrate." + src
}

// MigrationTopicConfigs returns the definitions of the two configs, for
// the node's table (topicconfig.New).
func MigrationTopicConfigs() []topicconfig.Def {
	return []topicconfig.Def{
		{Name: MigratedToConfig, Default: "", Type: "string", Validate: topicNameOrEmpty,
			Doc: "Set by fjord topic migrate at cutover: the topic refuses produces, naming this topic as where they now go."},
		{Name: MigratingFromConfig, Default: "", Type: "string", Validate: topicNameOrEmpty,
			Doc: "Set by fjord topic migrate on the topic it copies into: produces are refused (retriably) until the cutover opens it."},
	}
}

func topicNameOrEmpty(v string) error {
	if v == "" {
		return nil
	}
	return ValidateTopicName(v)
}
