package httpapi

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/groupview"
	"github.com/fjordmq/fjord/internal/metadata"
)

// Administration and operations, through kadm (the same requests as the
// fjord CLI and Kafka's tools):
//
//	GET    /v1/topics          names, partition counts, replication
//	                           (internal ones with ?internal=true)
//	POST   /v1/topics          {"name", "partitions", "replication_factor", "configs"}
//	GET    /v1/topics/{topic}  partitions (leader, replicas, ISR, log start
//	                           and end offsets) and configs
//	PATCH  /v1/topics/{topic}  {"partitions": new total, "configs": {name: value | null}, "allow_key_remap": bool}
//	DELETE /v1/topics/{topic}
//	GET    /v1/cluster         cluster id, controller, nodes
//	GET    /v1/groups          groups, state, protocol type
//	GET    /v1/groups/{group}  members and assignments; per partition
//	                           assigned or committed (the CLI's rows) the
//	                           committed offset, log end offset and lag,
//	                           null where there is none
//	DELETE /v1/groups/{group}, POST /v1/groups/{group}/reset-offsets
//	                           (admin_groups.go)

type topicSummary struct {
	Name              string `json:"name"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"`
	Internal          bool   `json:"internal"`
}

func (a *API) handleListTopics(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	if !a.ready(w, c) {
		return
	}
	topics, err := a.metadata(r.Context(), nil)
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	// Internal topics (Kafka's, and Fjord's own "__" ones such as the
	// idempotency index) only when asked for, as Kafka's tools do.
	withInternal := r.URL.Query().Get("internal") == "true"
	out := []topicSummary{}
	for _, td := range topics.Sorted() {
		if td.Err != nil {
			continue // a topic the client asked about before, not one that exists
		}
		if !withInternal && (td.IsInternal || strings.HasPrefix(td.Topic, "__")) {
			continue
		}
		// Only the topics the caller may describe, as Kafka's Metadata
		// of every topic lists them.
		if ok, _ := c.mayQuietly(onTopic(acl.OperationDescribe, td.Topic)); !ok {
			continue
		}
		out = append(out, topicSummary{Name: td.Topic, Partitions: len(td.Partitions), ReplicationFactor: td.Partitions.NumReplicas(), Internal: td.IsInternal})
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": out})
}

type createTopicRequest struct {
	Name              string            `json:"name"`
	Partitions        *int32            `json:"partitions"`
	ReplicationFactor *int16            `json:"replication_factor"`
	Configs           map[string]string `json:"configs"`
}

func (a *API) handleCreateTopic(w http.ResponseWriter, r *http.Request) {
	var req createTopicRequest
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	partitions, rf := int32(-1), int16(-1) // -1: the node's defaults
	if req.Partitions != nil {
		if *req.Partitions < 1 {
			writeError(w, badRequest("bad_partitions", "partitions %d: want 1 or more", *req.Partitions))
			return
		}
		partitions = *req.Partitions
	}
	if req.ReplicationFactor != nil {
		if *req.ReplicationFactor < 1 {
			writeError(w, badRequest("bad_replication_factor", "replication_factor %d: want 1 or more", *req.ReplicationFactor))
			return
		}
		rf = *req.ReplicationFactor
	}
	// CREATE on the cluster allows every topic, else CREATE on this one.
	if !a.allowedEither(w, r, onCluster(acl.OperationCreate), onTopic(acl.OperationCreate, req.Name)) {
		return
	}
	configs := make(map[string]*string, len(req.Configs))
	for k, v := range req.Configs {
		configs[k] = &v
	}
	defer a.forgetTopic(req.Name)
	resp, err := a.adm.CreateTopic(r.Context(), partitions, rf, configs, req.Name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		writeError(w, adminError(err, resp.ErrMessage))
		return
	}
	writeJSON(w, http.StatusCreated, topicSummary{Name: resp.Topic, Partitions: int(resp.NumPartitions), ReplicationFactor: int(resp.ReplicationFactor)})
}

type partitionDetail struct {
	Partition   int32   `json:"partition"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leader_epoch"`
	Replicas    []int32 `json:"replicas"`
	ISR         []int32 `json:"isr"`
	// LogStartOffset and LogEndOffset are null when the partition's
	// leader could not say.
	LogStartOffset *int64 `json:"log_start_offset"`
	LogEndOffset   *int64 `json:"log_end_offset"`
}

func (a *API) handleDescribeTopic(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	if !a.allowed(w, r, onTopic(acl.OperationDescribe, topic)) {
		return
	}
	td, err := a.topicPartitions(r.Context(), topic)
	if err != nil {
		writeError(w, err)
		return
	}
	starts, err := a.adm.ListStartOffsets(r.Context(), topic)
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	ends, err := a.adm.ListEndOffsets(r.Context(), topic)
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	parts := []partitionDetail{}
	for _, p := range td.Partitions.Sorted() {
		d := partitionDetail{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: nonNilInt32(p.Replicas), ISR: nonNilInt32(p.ISR)}
		if o, ok := starts.Lookup(topic, p.Partition); ok && o.Err == nil {
			d.LogStartOffset = &o.Offset
		}
		if o, ok := ends.Lookup(topic, p.Partition); ok && o.Err == nil {
			d.LogEndOffset = &o.Offset
		}
		parts = append(parts, d)
	}
	// Configs only for a caller who may describe them (DescribeConfigs'
	// DESCRIBE_CONFIGS); for another, null, as CreateTopics leaves them
	// out.
	configs := map[string]string{}
	if ok, _ := callerOf(r).mayQuietly(onTopic(acl.OperationDescribeConfigs, topic)); !ok {
		configs = nil
	} else if rcs, err := a.adm.DescribeTopicConfigs(r.Context(), topic); err == nil {
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Value != nil {
					configs[c.Key] = *c.Value
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		// Kafka's base64 form, as `fjord topic describe` prints it.
		"name": topic, "id": metadata.UUID(td.ID).Base64(), "internal": td.IsInternal,
		"partitions": parts, "configs": configs,
	})
}

type alterTopicRequest struct {
	Partitions *int32 `json:"partitions"`
	// AllowKeyRemap grows a topic that has keyed records anyway (the
	// CLI's --allow-key-remap): without it such a grow is refused, 409
	// keyed_topic, since it moves keys to other partitions.
	AllowKeyRemap bool `json:"allow_key_remap"`
	// Configs sets overrides; null removes one (back to the default),
	// as a JSON merge patch (RFC 7396) does.
	Configs map[string]*string `json:"configs"`
}

// PATCH /v1/topics/{topic} is `fjord topic alter`: grows the topic to
// partitions (the new total; partitions are never removed, and the same
// count changes nothing) and sets or removes config overrides. Both are
// validated by the cluster (ValidateOnly) before either is applied, so a
// refused part leaves the topic as it was.
func (a *API) handleAlterTopic(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	var req alterTopicRequest
	if err := decodeJSON(w, r, a.cfg.MaxBodyBytes, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Partitions == nil && len(req.Configs) == 0 {
		writeError(w, badRequest("nothing_to_change", `nothing to change: give "partitions" (the new total) or "configs" ({name: value, or null to remove})`))
		return
	}
	if req.Partitions != nil && *req.Partitions < 1 {
		writeError(w, badRequest("bad_partitions", "partitions %d: want the new total, 1 or more", *req.Partitions))
		return
	}
	// Each part as its Kafka request: CreatePartitions needs ALTER,
	// IncrementalAlterConfigs ALTER_CONFIGS.
	var needs []need
	if req.Partitions != nil {
		needs = append(needs, onTopic(acl.OperationAlter, topic))
	}
	if len(req.Configs) > 0 {
		needs = append(needs, onTopic(acl.OperationAlterConfigs, topic))
	}
	if !a.allowed(w, r, needs...) {
		return
	}
	ctx := r.Context()
	td, err := a.topicPartitions(ctx, topic)
	if err != nil {
		writeError(w, err)
		return
	}
	current := int32(len(td.Partitions))
	grow := req.Partitions != nil && *req.Partitions != current
	if grow && *req.Partitions < current {
		writeError(w, badRequest("bad_partitions", "partitions %d: topic %q has %d partitions and partitions cannot be removed; give a larger total",
			*req.Partitions, topic, current))
		return
	}
	var alters []kadm.AlterConfig
	for _, k := range slices.Sorted(maps.Keys(req.Configs)) {
		if v := req.Configs[k]; v != nil {
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: v})
		} else {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
	}
	defer a.forgetTopic(topic)
	for _, validateOnly := range []bool{true, false} {
		if len(alters) > 0 {
			alter := a.adm.AlterTopicConfigs
			if validateOnly {
				alter = a.adm.ValidateAlterTopicConfigs
			}
			resps, err := alter(ctx, alters, topic)
			var msg string
			if err == nil {
				var rc kadm.AlterConfigsResponse
				rc, err = resps.On(topic, nil)
				if err == nil {
					err, msg = rc.Err, rc.ErrMessage
				}
			}
			if errors.Is(err, kerr.InvalidConfig) {
				writeError(w, badRequest("invalid_config", "%s", cmp.Or(msg, err.Error())))
				return
			}
			if err != nil {
				writeError(w, adminError(err, msg))
				return
			}
		}
		if grow {
			msg, err := fjordmsg.GrowPartitions(ctx, a.reader, topic, *req.Partitions, growTimeout, req.AllowKeyRemap, validateOnly)
			if errors.Is(err, fjordmsg.ErrKeyedTopic) {
				writeError(w, &apiError{status: http.StatusConflict, code: "keyed_topic", msg: fmt.Sprintf(
					"not growing topic %q from %d to %d partitions: its records have keys, and growing it moves existing keys to other partitions, "+
						"so per-key order breaks across the change (nothing was changed); give \"allow_key_remap\": true to grow it anyway, "+
						"or migrate it to a new topic keeping each key's order (fjord topic migrate)", topic, current, *req.Partitions)})
				return
			}
			if err != nil {
				writeError(w, adminError(err, msg))
				return
			}
		}
	}
	out := map[string]any{"name": topic, "partitions": current, "configs": req.Configs}
	if req.Configs == nil {
		out["configs"] = map[string]*string{}
	}
	if grow {
		out["partitions"] = *req.Partitions
		out["warning"] = fmt.Sprintf("topic %q grew from %d to %d partitions: a key may map to another partition now, so records with the same key written before and after may be in different partitions and per-key order breaks across this change",
			topic, current, *req.Partitions)
	}
	writeJSON(w, http.StatusOK, out)
}

// growTimeout bounds a grow's commit, as kadm's default request timeout
// does for its other admin calls.
const growTimeout = 15 * time.Second

func (a *API) handleDeleteTopic(w http.ResponseWriter, r *http.Request) {
	topic := r.PathValue("topic")
	// As Kafka's DeleteTopics: DELETE on the cluster allows every topic,
	// else DELETE and DESCRIBE on this one. DELETE implies an allowed
	// DESCRIBE, but not past a DENY of DESCRIBE, which Kafka's check of
	// DESCRIBE then refuses: so it is asked too. (Kafka asks DESCRIBE
	// first; both refusals are the same 403, and DELETE first names
	// what a caller with neither lacks.)
	if !a.allowedEither(w, r, onCluster(acl.OperationDelete), onTopic(acl.OperationDelete, topic), onTopic(acl.OperationDescribe, topic)) {
		return
	}
	defer a.forgetTopic(topic)
	resp, err := a.adm.DeleteTopic(r.Context(), topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		writeError(w, adminError(err, resp.ErrMessage))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": topic})
}

func (a *API) handleCluster(w http.ResponseWriter, r *http.Request) {
	md, err := a.adm.BrokerMetadata(r.Context())
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	type nodeJSON struct {
		NodeID int32   `json:"node_id"`
		Host   string  `json:"host"`
		Port   int32   `json:"port"`
		Rack   *string `json:"rack,omitempty"`
	}
	nodes := []nodeJSON{}
	for _, b := range md.Brokers {
		nodes = append(nodes, nodeJSON{NodeID: b.NodeID, Host: b.Host, Port: b.Port, Rack: b.Rack})
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].NodeID < nodes[j].NodeID })
	writeJSON(w, http.StatusOK, map[string]any{"cluster_id": md.Cluster, "controller": md.Controller, "nodes": nodes})
}

func (a *API) handleListGroups(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	if !a.ready(w, c) {
		return
	}
	// As Kafka's ListGroups: DESCRIBE on the cluster lists every group,
	// else only those the caller may describe.
	all, _ := c.mayQuietly(onCluster(acl.OperationDescribe))
	listed, err := a.adm.ListGroups(r.Context())
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	type groupJSON struct {
		Group        string `json:"group"`
		State        string `json:"state"`
		ProtocolType string `json:"protocol_type"`
	}
	out := []groupJSON{}
	for _, g := range listed.Sorted() {
		if !all {
			if ok, _ := c.mayQuietly(onGroup(acl.OperationDescribe, g.Group)); !ok {
				continue
			}
		}
		out = append(out, groupJSON{Group: g.Group, State: g.State, ProtocolType: g.ProtocolType})
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out})
}

func (a *API) handleDescribeGroup(w http.ResponseWriter, r *http.Request) {
	group := r.PathValue("group")
	if !a.allowed(w, r, onGroup(acl.OperationDescribe, group)) {
		return
	}
	// The topics in the answer (assignments, offsets) are only those the
	// caller may describe, as OffsetFetch of every topic filters them.
	c := callerOf(r)
	visible := func(topic string) bool {
		ok, _ := c.mayQuietly(onTopic(acl.OperationDescribe, topic))
		return ok
	}
	described, err := a.adm.DescribeGroups(r.Context(), group)
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	d := described[group]
	if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		writeError(w, d.Err)
		return
	}
	offsets, err := a.adm.FetchOffsets(r.Context(), group)
	if err == nil {
		err = offsets.Error()
	}
	if err != nil {
		writeError(w, kafkaError(err))
		return
	}
	if errors.Is(d.Err, kerr.GroupIDNotFound) || (d.State == "Dead" && len(offsets) == 0) {
		writeError(w, &apiError{status: http.StatusNotFound, code: "unknown_group", msg: "group " + group + " does not exist"})
		return
	}
	type memberJSON struct {
		MemberID    string             `json:"member_id"`
		InstanceID  *string            `json:"instance_id"`
		ClientID    string             `json:"client_id"`
		Host        string             `json:"host"`
		Assignments map[string][]int32 `json:"assignments"`
	}
	members := []memberJSON{}
	for _, m := range d.Members {
		mj := memberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost, Assignments: map[string][]int32{}}
		if ca, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range ca.Topics {
				if visible(t.Topic) {
					mj.Assignments[t.Topic] = slices.Clone(t.Partitions)
				}
			}
		}
		members = append(members, mj)
	}
	// The rows are `fjord group describe`'s (groupview.Rows): every
	// partition assigned to a member and every partition with a commit;
	// what is not known is null, not -1.
	type offsetJSON struct {
		Topic       string   `json:"topic"`
		Partition   int32    `json:"partition"`
		Committed   *int64   `json:"committed"`
		LogStart    *int64   `json:"log_start"`
		LogEnd      *int64   `json:"log_end"`
		Lag         *int64   `json:"lag"`
		LagBytes    *int64   `json:"lag_bytes"`
		LagSeconds  *float64 `json:"lag_seconds"`
		RecordsLost *int64   `json:"records_lost"`
		Member      *string  `json:"member"`
	}
	viewRows, err := groupview.Rows(r.Context(), a.reader, a.adm, d, offsets)
	if err != nil {
		writeError(w, unavailable(err))
		return
	}
	rows := []offsetJSON{}
	for _, v := range viewRows {
		if !visible(v.Topic) {
			continue
		}
		rows = append(rows, offsetJSON{Topic: v.Topic, Partition: v.Partition, Committed: v.Committed, LogStart: v.LogStart, LogEnd: v.LogEnd,
			Lag: v.Lag, LagBytes: v.LagBytes, LagSeconds: v.LagSeconds, RecordsLost: v.Lost, Member: v.Member})
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"group": group, "state": d.State, "protocol_type": d.ProtocolType, "protocol": d.Protocol,
		"members": members, "offsets": rows,
	})
}

// adminError maps a topic admin error, with the server's message when it
// gave one.
func adminError(err error, msg string) *apiError {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		text := err.Error()
		if msg != "" {
			text = msg
		}
		switch ke {
		case kerr.TopicAlreadyExists:
			return &apiError{status: http.StatusConflict, code: "topic_exists", msg: text}
		case kerr.InvalidTopicException, kerr.InvalidPartitions, kerr.InvalidReplicationFactor,
			kerr.InvalidConfig, kerr.InvalidRequest, kerr.InvalidReplicaAssignment, kerr.PolicyViolation:
			return &apiError{status: http.StatusBadRequest, code: "invalid_topic", msg: text}
		}
	}
	return kafkaError(err)
}

// outOfRangeCodes are the error codes of numeric fields whose value
// overflows its type, by JSON field name.
var outOfRangeCodes = map[string]string{
	"partition":  "bad_partition",
	"partitions": "bad_partitions",
	"offset":     "bad_offset",
	"offsets":    "bad_offset",
	"timestamp":  "bad_timestamp",
	"shift_by":   "bad_reset",
}

// decodeJSON decodes one JSON value of at most limit bytes into v,
// refusing unknown fields.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err, limit)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("malformed_json", "more than one JSON value in the body")
	}
	return nil
}

type topicPartition struct {
	topic     string
	partition int32
}

func nonNilInt32(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}
