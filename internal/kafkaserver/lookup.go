package kafkaserver

import "github.com/fjordmq/fjord/internal/metadata"

// Lookups on the metadata image, shared by the data and admin handlers.
//
// A handler that looks at more than one topic should take one image with
// s.image() and use the image-level helpers, so its whole answer is from
// one point of the metadata log; the Server methods are shorthands for a
// single lookup.

// image returns the latest metadata image, never nil (an empty image
// before the controller has published one, so handlers need no nil
// checks: every topic is then unknown).
func (s *Server) image() *metadata.Image {
	if img := s.controller.Image(); img != nil {
		return img
	}
	return s.emptyImage
}

// topicByName returns the topic named name in the latest image.
func (s *Server) topicByName(name string) (*metadata.Topic, bool) {
	return lookupTopic(s.image(), name)
}

// topicByID returns the topic with id in the latest image.
func (s *Server) topicByID(id metadata.UUID) (*metadata.Topic, bool) {
	return lookupTopicID(s.image(), id)
}

// lookupTopic returns img's topic named name.
func lookupTopic(img *metadata.Image, name string) (*metadata.Topic, bool) {
	t, ok := img.Topics[name]
	return t, ok && t != nil
}

// lookupTopicID returns img's topic with id. The zero id is never a
// topic's (clients send it for "by name").
func lookupTopicID(img *metadata.Image, id metadata.UUID) (*metadata.Topic, bool) {
	if id == (metadata.UUID{}) {
		return nil, false
	}
	t, ok := img.TopicsByID[id]
	return t, ok && t != nil
}

// lookupPartition returns partition p of t.
func lookupPartition(t *metadata.Topic, p int32) (*metadata.Partition, bool) {
	if p < 0 || int(p) >= len(t.Partitions) {
		return nil, false
	}
	return &t.Partitions[p], true
}
