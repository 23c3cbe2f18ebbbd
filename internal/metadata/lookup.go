package metadata

import (
	"slices"

	"github.com/fjordmq/fjord/internal/topicconfig"
)

// Empty returns the image before the first record: no cluster id, no
// brokers, no topics, and configs as the topic configs every image
// applied from it knows. configs must not be nil.
func Empty(configs *topicconfig.Table) *Image {
	if configs == nil {
		panic("metadata.Empty: no topic-config table")
	}
	return &Image{
		Brokers:      map[int32]Broker{},
		Topics:       map[string]*Topic{},
		TopicsByID:   map[UUID]*Topic{},
		TopicConfigs: configs,
	}
}

// Topic returns the live topic with this name. The *Topic is shared with
// other images: read it, never modify it.
func (img *Image) Topic(name string) (*Topic, bool) {
	t, ok := img.Topics[name]
	return t, ok
}

// TopicByID returns the live topic with this id.
func (img *Image) TopicByID(id UUID) (*Topic, bool) {
	t, ok := img.TopicsByID[id]
	return t, ok
}

// TopicNames returns the live topics' names, sorted.
func (img *Image) TopicNames() []string {
	names := make([]string, 0, len(img.Topics))
	for n := range img.Topics {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Broker returns a registered broker.
func (img *Image) Broker(id int32) (Broker, bool) {
	b, ok := img.Brokers[id]
	return b, ok
}

// BrokerIDs returns the registered brokers' ids, sorted.
func (img *Image) BrokerIDs() []int32 {
	ids := make([]int32, 0, len(img.Brokers))
	for id := range img.Brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// ReplicationFactor is the number of replicas of t's partitions (every
// partition of a topic has as many), 0 for a topic without partitions.
func (t *Topic) ReplicationFactor() int {
	if len(t.Partitions) == 0 {
		return 0
	}
	return len(t.Partitions[0].Replicas)
}

// Partition returns partition p of t. Its slices are shared: read only.
func (t *Topic) Partition(p int32) (*Partition, bool) {
	if p < 0 || int(p) >= len(t.Partitions) {
		return nil, false
	}
	return &t.Partitions[p], true
}

// TopicConfig returns t's value for a config: its override if set, else
// its default (TopicConfigDefault). t need not be in the image (a topic
// a CreateTopics only validated).
func (img *Image) TopicConfig(t *Topic, name string) string {
	if v, ok := t.Configs[name]; ok {
		return v
	}
	return img.TopicConfigDefault(t, name)
}

// TopicConfigDefault returns the default of a config for t, whatever
// t overrides: the image's TopicConfigs' default, or for a setting that
// depends on the replication factor (ConfigDef.DefaultFor) the default
// for t's. "" for an unknown name.
func (img *Image) TopicConfigDefault(t *Topic, name string) string {
	def, _ := img.TopicConfigs.Lookup(name)
	if def.DefaultFor != nil {
		return def.DefaultFor(t.ReplicationFactor())
	}
	return def.Default
}
