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
//
// Authorization (ControllerApis.deleteTopics): DELETE on the cluster
// allows every topic; without it a topic needs DESCRIBE and DELETE. The
// checks come after the request's own duplicates (a name, or an id,
// given twice: saying so tells nothing the request did not) and before
// existence, so a denied name is TOPIC_AUTHORIZATION_FAILED whether or
// not the topic exists, with no id in the answer. An id is resolved
// first (ids are not secret: an id this node's image does not know is
// UNKNOWN_TOPIC_ID here, without asking the controller, since there is
// no name to authorize), then authorized by its topic's name; the answer
// to a denied id names the topic only to a principal that may DESCRIBE
// it. A name and an id of the same topic are refused as duplicates only
// once both are authorized: before, that would tell the caller which
// name an id has. A denied topic never reaches the controller and costs
// no mutation quota. With authorization off, an id this node does not
// know goes to the controller, which knows the latest topics.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
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
		byID bool
		// topic is the topic's name in this node's image: the name
		// given, or the id's topic ("" when the id is unknown).
		topic string
		// literal is the entry as given, for the request's own
		// duplicates; repeated records that it is one.
		literal  string
		repeated bool
		label    string // for messages: the name, or the id when unknown
		err      error
	}
	var entries []entry
	if req.version < 6 {
		for _, n := range r.TopicNames {
			entries = append(entries, entry{name: strp(n)})
		}
	} else {
		for _, t := range r.Topics {
			e := entry{name: t.Topic, id: t.TopicID, byID: t.Topic == nil}
			if t.Topic != nil && !e.id.IsZero() {
				e.err = invalidRequest("topic %q and id %s given in one entry; give one or the other", *t.Topic, e.id)
			}
			entries = append(entries, e)
		}
	}

	img := s.image()
	literals := make(map[string]int, len(entries))
	for i := range entries {
		e := &entries[i]
		if e.byID {
			e.literal, e.label = "id:"+e.id.String(), "id "+e.id.String()
			if t, ok := lookupTopicID(img, e.id); ok {
				e.topic = t.Name
			}
		} else {
			e.literal, e.label = "name:"+*e.name, fmt.Sprintf("%q", *e.name)
			e.topic = *e.name
		}
		literals[e.literal]++
	}
	for i := range entries {
		if e := &entries[i]; e.err == nil && literals[e.literal] > 1 {
			e.repeated = true
			e.err = invalidRequest("topic %s appears %d times in the request", e.label, literals[e.literal])
		}
	}

	// Kafka's hasClusterAuth gives both rights on every topic.
	deletable := s.authzByName(req, acl.OperationDelete, acl.ResourceTopic).orCluster(acl.OperationDelete)
	describable := s.authzFilterByName(req, acl.OperationDescribe, acl.ResourceTopic)
	describable.all = deletable.all
	system := s.systemTopicWrites(req) // and ALTER on the cluster for a system topic, even with DELETE on the cluster (authz_system.go)
	for i := range entries {
		e := &entries[i]
		switch {
		case e.err != nil:
		case e.byID && e.topic == "":
			if s.authorizer() != nil {
				e.err = fmt.Errorf("%w: no topic has id %s", kerr.UnknownTopicID, e.id)
			}
		case !deletable.allowed(e.topic) || !describable.allowed(e.topic):
			e.err = authzError(acl.ResourceTopic)
			switch {
			case e.byID && describable.allowed(e.topic):
				e.name = strp(e.topic)
			case !e.byID && describable.allowed(e.topic):
				// Kafka tells one who may describe the name that it
				// does not exist.
				if _, ok := lookupTopic(img, e.topic); !ok {
					e.err = fmt.Errorf("%w: unknown topic %q", kerr.UnknownTopicOrPartition, e.topic)
				}
			}
		case !system.allowed(e.topic):
			e.err = authzError(acl.ResourceTopic)
		}
	}

	// A topic named in two ways (or in two ways and more), once both
	// are authorized: every such entry is refused, the repeated ones
	// counted in.
	counts := make(map[string]int, len(entries))
	for _, e := range entries {
		if e.topic != "" && (e.err == nil || e.repeated) {
			counts[e.topic]++
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.err != nil || e.topic == "" || counts[e.topic] < 2 {
			continue
		}
		label := e.label
		if e.byID {
			label = fmt.Sprintf("%q (id %s)", e.topic, e.id)
		}
		e.err = invalidRequest("topic %s appears %d times in the request", label, counts[e.topic])
	}

	// v6 answers a name with its id, when the caller may describe it.
	for i := range entries {
		e := &entries[i]
		if req.version < 6 || e.byID || !describable.allowed(e.topic) {
			continue
		}
		if t, ok := lookupTopic(img, e.topic); ok {
			e.id = t.ID
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
		if t, ok := lookupTopic(img, e.topic); ok {
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
		case !e.byID:
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
