package kafkaserver

// DeleteTopics: v0-6
//
// Deletes topics through the controller; the answer comes once the
// deletion is committed and applied on this node (its partitions' logs
// are gone). v0-5 name topics; v6 (KIP-516) names each topic either by
// name or by id. Per entry, in request order:
//   - v6 with both a name and a non-zero id is INVALID_REQUEST;
//   - a topic named more than once (by name, by id, or once each way, as
//     resolved in the current image) is INVALID_REQUEST for every
//     occurrence, as in Kafka;
//   - an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id
//     UNKNOWN_TOPIC_ID (the controller decides: it is the one that knows
//     at commit time).
//
// v5+ answers carry a message; v6 answers carry both the name and the id
// of each topic it could resolve. TimeoutMillis bounds the wait for the
// commit (REQUEST_TIMED_OUT after).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/metadata"
)

func handleDeleteTopics(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DeleteTopicsRequest)
	resp := kmsg.NewPtrDeleteTopicsResponse()
	resp.SetVersion(req.version)

	// One entry per requested topic, whatever the version's form.
	type entry struct {
		name *string
		id   metadata.UUID
		// key identifies the topic for duplicate detection: its name
		// when known (given, or resolved from the id), else its id.
		key   string
		label string // for messages: the name, or the id when unknown
		err   error
	}
	var entries []entry
	if req.version < 6 {
		for _, n := range r.TopicNames {
			entries = append(entries, entry{name: strp(n)})
		}
	} else {
		for _, t := range r.Topics {
			e := entry{name: t.Topic, id: t.TopicID}
			if t.Topic != nil && !e.id.IsZero() {
				e.err = invalidRequest("topic %q and id %s given in one entry; give one or the other", *t.Topic, e.id)
			}
			entries = append(entries, e)
		}
	}

	img := s.image()
	counts := make(map[string]int, len(entries))
	for i := range entries {
		e := &entries[i]
		switch {
		case e.name != nil:
			e.key, e.label = "name:"+*e.name, fmt.Sprintf("%q", *e.name)
			if t, ok := lookupTopic(img, *e.name); ok && req.version >= 6 {
				e.id = t.ID
			}
		default:
			e.key, e.label = "id:"+e.id.String(), "id "+e.id.String()
			if t, ok := lookupTopicID(img, e.id); ok {
				e.key, e.label = "name:"+t.Name, fmt.Sprintf("%q (id %s)", t.Name, e.id)
			}
		}
		counts[e.key]++
	}
	for i := range entries {
		if e := &entries[i]; e.err == nil && counts[e.key] > 1 {
			e.err = invalidRequest("topic %s appears %d times in the request", e.label, counts[e.key])
		}
	}

	mq := s.mutationQuotaFor(req, 5, false)
	for i := range entries {
		e := &entries[i]
		if e.err != nil {
			continue
		}
		// The partitions a deletion removes, from the image (none for a
		// topic it does not know, which the controller refuses anyway).
		n := 0
		if e.name != nil {
			if t, ok := lookupTopic(img, *e.name); ok {
				n = len(t.Partitions)
			}
		} else if t, ok := lookupTopicID(img, e.id); ok {
			n = len(t.Partitions)
		}
		e.err = mq.admit(s, req, n)
	}

	var names []string
	var nameIdx []int
	var ids []metadata.UUID
	var idIdx []int
	for i, e := range entries {
		switch {
		case e.err != nil:
		case e.name != nil:
			names = append(names, *e.name)
			nameIdx = append(nameIdx, i)
		default:
			ids = append(ids, e.id)
			idIdx = append(idIdx, i)
		}
	}
	dctx, cancel := withRequestTimeout(ctx, r.TimeoutMillis)
	defer cancel()
	if len(names) > 0 {
		for j, err := range s.controller.DeleteTopics(dctx, names) {
			entries[nameIdx[j]].err = err
		}
	}
	if len(ids) > 0 {
		resolved, errs := s.controller.DeleteTopicsByID(dctx, ids)
		for j := range ids {
			e := &entries[idIdx[j]]
			e.err = errs[j]
			if resolved[j] != "" {
				e.name = strp(resolved[j])
			}
		}
	}

	for _, e := range entries {
		if e.err == nil && e.name != nil {
			s.metrics.forgetTopic(*e.name)
		}
		out := kmsg.NewDeleteTopicsResponseTopic()
		out.Topic = e.name
		out.TopicID = e.id
		out.ErrorCode, out.ErrorMessage = s.errorAndMessage(e.err, "DeleteTopics", "topic", e.label)
		resp.Topics = append(resp.Topics, out)
	}
	return resp, nil, nil
}
