package httpapi

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
)

// GET /v1/openapi.json describes every route in OpenAPI 3.0, built from
// the same table Register mounts, so the document cannot name a route
// that does not exist or miss one that does.

// routeDoc is what the document says of a route.
type routeDoc struct {
	summary string
	query   []param // query parameters
	body    string  // the request body's JSON, described; "" for none
	answer  string  // the 2xx answer's JSON, described
	errors  []int   // the error statuses it can answer (besides 401, 403 and 429)
}

type param struct {
	name, typ, desc string
	required        bool
}

// apiRoutes is every route of the API.
var apiRoutes = []route{
	{"POST", "/v1/topics/{topic}/produce", (*API).handleProduce, routeDoc{
		summary: "Produce one record, or a batch, with Kafka's guarantees for the acks asked for; a missing topic is created where the node auto-creates topics, else 404",
		body:    `{"key": string (text) | "key_b64": base64 (bytes; not both), "value": base64 | null, "headers": {name: base64 | null} | [{"name": string, "value": base64 | null}] (a list keeps order and repeated names), "partition": int, "idempotency_key": string (a retry, on any node, answers the first result; the key with another record is 422 idempotency_key_reused; while the first may still be written, 409 idempotency_key_in_progress with Retry-After), "acks": "all" | "1" | "0"} or {"records": [...], "acks": ...}. A topic whose migration has cut over (fjord topic migrate) answers 409 topic_migrated, naming the topic that takes its produces now`,
		answer:  `{"partition": int, "offset": int, "timestamp": ms} or {"results": [that | {"error", "message"}]} in request order`,
		errors:  []int{400, 404, 409, 413, 422, 503},
	}},
	{"GET", "/v1/topics/{topic}/partitions/{partition}/records", (*API).handleRead, routeDoc{
		summary: "Read a partition from an offset, without a group",
		query: []param{{"offset", "integer", "first offset (default: the log start)", false},
			{"max_bytes", "integer", "answer size bound", false}, {"timeout_ms", "integer", "long-poll for a record, up to 30000", false},
			{"isolation", "string", "read_uncommitted (default: to the high watermark, open and aborted transactions' records included) or read_committed (to the last stable offset, aborted transactions' records dropped); anything else is 400 bad_isolation", false}},
		answer: `{"records": [{"partition", "offset", "key": text or null (no key, or not UTF-8), "key_b64": the key's bytes (absent without a key), "value", "headers": {name: base64 | null} (the last of each name), "header_list": [{"name", "value"}] (every header in order; only when a name repeats), "timestamp"}], "next_offset" (where the next read continues: past every record, transaction marker and aborted record this answer covered, never below offset), "high_watermark", "last_stable_offset" (where read_committed reads stop: the first offset of the oldest open transaction, else the high watermark; given for either isolation), "log_start_offset"}`,
		errors: []int{400, 404, 416, 503},
	}},
	{"GET", "/v1/topics/{topic}/consume", (*API).handleConsume, routeDoc{
		summary: "Consume as a member of a consumer group (at-least-once)",
		query: []param{{"group", "string", "the consumer group", true}, {"consumer", "string", "instance id (default: one per group and topic)", false},
			{"max_bytes", "integer", "answer size bound", false}, {"timeout_ms", "integer", "long-poll for a record, up to 30000 (default 1000)", false},
			{"auto_offset_reset", "string", "where a new instance starts in partitions its group has no committed offset for: latest (default, the log end) or earliest (the log start)", false},
			{"isolation", "string", "the level a new instance fetches at for its life: read_uncommitted (default) or read_committed (committed transactions' records only); naming the other level than the running instance's is 409 isolation_mismatch, naming none takes the instance's", false},
			{"ack_mode", "string", "how a new instance's records are acknowledged, for its life: offsets (default: commit offsets) or records (ack and nack each record; the commit follows the contiguous acknowledged prefix); naming the other mode than the running instance's is 409 ack_mode_mismatch", false}},
		answer: `{"records": [as records gives them: "key" text or null, "key_b64" bytes], "next_offsets": {partition: next offset}, "gaps": [{"partition": int, "reason": "behind_log_start" | "past_log_end", "position": int | null, "committed_offset": int | null, "log_start_offset": int, "log_end_offset": int, "records_lost": int | null}] (always present; nothing is delivered from a gap's partition until a seek), "joining": bool (true while the instance waits for its first assignment), "generation": int (acks and nacks name it), "unacked": int and "unacked_limit": bool (ack_mode=records: records handed out and not acknowledged, and whether their bound of 10000 held this answer back), "paused": [{"partition", "offset", "reason", "attempts", "at_ms"}] (ack_mode=records: partitions stopped at a poison record)}`,
		errors: []int{400, 404, 409, 503},
	}},
	{"DELETE", "/v1/topics/{topic}/consume", (*API).handleCloseConsumer, routeDoc{
		summary: "Close the consumer instance that consumes with these parameters on this node: it leaves its group at once",
		query:   []param{{"group", "string", "the consumer group", true}, {"consumer", "string", "instance id (default: the group and topic's default instance)", false}},
		answer:  `{"closed": {"group", "topic", "consumer"}}`,
		errors:  []int{400, 404},
	}},
	{"POST", "/v1/topics/{topic}/commit", (*API).handleCommit, routeDoc{
		summary: "Commit a group's next offsets (Kafka's convention)",
		body:    `{"group": string, "consumer": string, "offsets": {partition: next offset}}`,
		answer:  `{"committed": {partition: offset}}`,
		errors:  []int{400, 404, 409, 416, 503},
	}},
	{"POST", "/v1/topics/{topic}/ack", (*API).handleAck, routeDoc{
		summary: "Acknowledge records a consumer instance in ack_mode=records handed out; the group's commit moves to the end of each partition's contiguous acknowledged prefix",
		body:    `{"group": string, "consumer": string, "generation": int (the delivering consume's), "offsets": {partition: [offset, ...]}}`,
		answer:  `{"committed": {partition: next offset} (the partitions whose commit moved), "unacked": int}`,
		errors:  []int{400, 404, 409},
	}},
	{"POST", "/v1/topics/{topic}/nack", (*API).handleNack, routeDoc{
		summary: "Report a record a consumer instance in ack_mode=records handed out as failed: it comes again, until the group's poison policy for the topic pauses the partition or dead-letters it",
		body:    `{"group": string, "consumer": string, "generation": int, "partition": int, "offset": int, "reason": string (at most 4096 bytes)}`,
		answer:  `{"partition", "offset", "attempts", "max_attempts" (null without a policy), "action": "redeliver" | "paused" | "dead_lettered", "dlq": {"topic", "partition", "offset"} and "committed" (dead_lettered)}`,
		errors:  []int{400, 404, 409, 503},
	}},
	{"POST", "/v1/topics/{topic}/seek", (*API).handleSeek, routeDoc{
		summary: "Move where a group next reads a partition (replay)",
		body:    `{"group": string, "consumer": string, "partition": int, "offset": int | "timestamp": ms | "to": "earliest" | "latest"}`,
		answer:  `{"partition": int, "offset": int}`,
		errors:  []int{400, 404, 409, 416, 503},
	}},
	{"GET", "/v1/topics", (*API).handleListTopics, routeDoc{
		summary: "List topics",
		answer:  `{"topics": [{"name", "partitions", "replication_factor", "internal"}]}`,
		errors:  []int{503},
	}},
	{"POST", "/v1/topics", (*API).handleCreateTopic, routeDoc{
		summary: "Create a topic",
		body:    `{"name": string, "partitions": int, "replication_factor": int, "configs": {name: value}}`,
		answer:  `{"name", "partitions", "replication_factor"}`,
		errors:  []int{400, 409, 503},
	}},
	{"GET", "/v1/topics/{topic}", (*API).handleDescribeTopic, routeDoc{
		summary: "Describe a topic: partitions (leader, replicas, ISR, log start and end offsets) and configs",
		answer:  `{"name", "id" (Kafka's base64 topic id, as fjord topic describe prints it), "internal", "partitions": [{"partition", "leader", "leader_epoch", "replicas", "isr", "log_start_offset", "log_end_offset" (null when unknown)}], "configs": {name: value}}`,
		errors:  []int{404, 503},
	}},
	{"PATCH", "/v1/topics/{topic}", (*API).handleAlterTopic, routeDoc{
		summary: "Alter a topic: grow it to a new total of partitions (never fewer), set config overrides or remove them (null), all validated before any is applied. A topic with keyed records grows only with allow_key_remap (else 409 keyed_topic): growing moves its keys to other partitions",
		body:    `{"partitions": int, "configs": {name: value | null}, "allow_key_remap": bool}`,
		answer:  `{"name", "partitions", "configs": {name: value | null}, "warning": present when the partitions grew (keys may map to other partitions)}`,
		errors:  []int{400, 404, 409, 503},
	}},
	{"DELETE", "/v1/topics/{topic}", (*API).handleDeleteTopic, routeDoc{
		summary: "Delete a topic",
		answer:  `{"deleted": name}`,
		errors:  []int{404, 503},
	}},
	{"GET", "/v1/cluster", (*API).handleCluster, routeDoc{
		summary: "The cluster: id, controller, nodes",
		answer:  `{"cluster_id", "controller", "nodes": [{"node_id", "host", "port", "rack"}]}`,
		errors:  []int{503},
	}},
	{"GET", "/v1/groups", (*API).handleListGroups, routeDoc{
		summary: "List consumer groups",
		answer:  `{"groups": [{"group", "state", "protocol_type"}]}`,
		errors:  []int{503},
	}},
	{"GET", "/v1/groups/{group}", (*API).handleDescribeGroup, routeDoc{
		summary: "Describe a group: members, assignments, committed offsets, log ends and lag (records, bytes, seconds)",
		answer:  `{"group", "state", "protocol_type", "protocol", "members": [...], "offsets": [{"topic", "partition", "committed", "log_start", "log_end", "lag", "lag_bytes", "lag_seconds", "records_lost", "member"}]}: a row per partition assigned to a member or committed, as fjord group describe; lag_bytes (log bytes from the committed offset to the high watermark), lag_seconds (age of the first unconsumed record, 0 when caught up) and records_lost (records retention deleted below the log start before the group read them) come from the partition's leader; what is not known is null`,
		errors:  []int{404, 503},
	}},
	{"DELETE", "/v1/groups/{group}", (*API).handleDeleteGroup, routeDoc{
		summary: "Delete a group without members and its committed offsets",
		answer:  `{"deleted": group}`,
		errors:  []int{400, 404, 409, 503},
	}},
	{"POST", "/v1/groups/{group}/reset-offsets", (*API).handleResetOffsets, routeDoc{
		summary: "Move a group's committed offsets (the group must have no members); a target outside a log is moved to its start or end",
		body:    `{"topics": [{"topic": string, "partitions": [int] (absent: all)}], "to": "earliest" | "latest" | "offset": int | "timestamp": ms | "shift_by": int, "dry_run": bool}`,
		answer:  `{"group", "dry_run", "offsets": [{"topic", "partition", "old" (absent: none committed), "new", "clamped_from" (present when the target was outside the log)}]}`,
		errors:  []int{400, 404, 409, 503},
	}},
	{"GET", "/v1/groups/{group}/poison", (*API).handleGetPolicies, routeDoc{
		summary: "A group's poison-record policies and the partitions it paused at a poison record",
		answer:  `{"group", "policies": [{"group", "topic", "policy": "pause" | "dlq", "max_attempts", "dlq_topic" (dlq)}], "paused": [{"topic", "partition", "offset", "reason", "attempts", "at_ms", "skip" (a resume's skip not carried out yet)}]}`,
		errors:  []int{503},
	}},
	{"PUT", "/v1/groups/{group}/poison/{topic}", (*API).handleSetPolicy, routeDoc{
		summary: "Set a group's poison-record policy for a topic: after max_attempts nacks of one record, pause the partition or write the record to a dead-letter topic (created if missing) and move on",
		body:    `{"policy": "pause" | "dlq", "max_attempts": int (1 to 1000), "dlq_topic": string (dlq; default <topic>.dlq)}`,
		answer:  `{"group", "topic", "policy", "max_attempts", "dlq_topic" (dlq)}`,
		errors:  []int{400, 404, 503},
	}},
	{"DELETE", "/v1/groups/{group}/poison/{topic}", (*API).handleClearPolicy, routeDoc{
		summary: "Clear a group's poison-record policy for a topic (nacks then only redeliver); pauses stay until resumed",
		answer:  `{"group", "topic", "cleared": bool (there was one)}`,
		errors:  []int{503},
	}},
	{"POST", "/v1/groups/{group}/resume", (*API).handleResume, routeDoc{
		summary: "End a pause: delivery starts again at the paused record, or with skip after it, once the record is in the dead-letter topic",
		body:    `{"topic": string, "partition": int, "skip": bool}`,
		answer:  `{"group", "topic", "partition", "offset", "skipped", "dlq": {"topic", "partition", "offset"} (skip), "committed": bool (false: the partition's owner commits past it at its next consume)}`,
		errors:  []int{400, 404, 503},
	}},
}

// opsRoutes are the listener's other GET endpoints, documented here so
// the document covers everything on --http-addr: the node mounts
// /healthz, /readyz and /metrics beside the API, and Register mounts
// the document itself. None is behind the API's concurrency limits, and
// the node's three are open unless it protects them (Protect: 401 and
// 403 as the API's routes).
var opsRoutes = []struct {
	path, summary, contentType, answer string
	errors                             []int
}{
	{"/v1/openapi.json", "This document", "application/json", "OpenAPI 3.0", nil},
	{"/healthz", "Liveness: 200 while the process serves HTTP at all", "text/plain", `"ok"`, nil},
	{"/readyz", "Readiness: 200 once the node serves its partitions, else 503 with the reason", "text/plain", `"ready"`, []int{503}},
	{"/metrics", "Prometheus metrics: Kafka and HTTP requests, per-topic bytes and records, partitions, fsync latency, group lag, the Go runtime. " +
		"Like /healthz and /readyz, open unless the node runs with --http-protect-metrics-and-health (then credentials and DESCRIBE on the cluster; /healthz credentials alone)",
		"text/plain", "Prometheus text exposition format", nil},
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// openAPIDocument is the OpenAPI 3.0 document of apiRoutes.
func openAPIDocument() map[string]any {
	errorSchema := map[string]any{
		"type":     "object",
		"required": []string{"error", "message"},
		"properties": map[string]any{
			"error":   map[string]any{"type": "string", "description": "a stable code, e.g. unknown_topic"},
			"message": map[string]any{"type": "string"},
		},
	}
	paths := map[string]map[string]any{}
	for _, rt := range apiRoutes {
		var params []map[string]any
		for _, m := range pathParam.FindAllStringSubmatch(rt.path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.doc.query {
			params = append(params, map[string]any{"name": q.name, "in": "query", "required": q.required,
				"description": q.desc, "schema": map[string]any{"type": q.typ}})
		}
		ok := "200"
		if rt.method == http.MethodPost && rt.path == "/v1/topics" {
			ok = "201"
		}
		responses := map[string]any{ok: map[string]any{"description": rt.doc.answer,
			"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}}
		// Every route can be refused its caller (auth.go, authz.go).
		for _, st := range append(append([]int(nil), rt.doc.errors...), http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests) {
			responses[strconv.Itoa(st)] = map[string]any{"description": http.StatusText(st),
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/Error"}}}}
		}
		op := map[string]any{"summary": rt.doc.summary, "responses": responses}
		if params != nil {
			op["parameters"] = params
		}
		if rt.doc.body != "" {
			op["requestBody"] = map[string]any{"required": true, "description": rt.doc.body,
				"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}
		}
		if paths[rt.path] == nil {
			paths[rt.path] = map[string]any{}
		}
		paths[rt.path][strings.ToLower(rt.method)] = op
	}
	for _, o := range opsRoutes {
		responses := map[string]any{"200": map[string]any{"description": o.answer,
			"content": map[string]any{o.contentType: map[string]any{"schema": map[string]any{"type": "string"}}}}}
		for _, st := range o.errors {
			responses[strconv.Itoa(st)] = map[string]any{"description": http.StatusText(st),
				"content": map[string]any{"text/plain": map[string]any{"schema": map[string]any{"type": "string"}}}}
		}
		paths[o.path] = map[string]any{"get": map[string]any{"summary": o.summary, "responses": responses}}
	}
	return map[string]any{
		"openapi": "3.0.3",
		"info": map[string]any{"title": "Fjord HTTP API", "version": "1",
			"description": "Produce, read, consume as a group, commit and seek over JSON; topic, cluster and group administration. Bytes are base64, times Unix milliseconds. " +
				"A request body is at most the node's --http-max-body-bytes (413 body_too_large), a record at most its topic's max.message.bytes (413 record_too_large). " +
				"Where the node authenticates its Kafka clients every route needs Basic or Bearer credentials (401 unauthenticated); each route checks the ACLs its Kafka equivalent does (403 forbidden)."},
		"paths": paths,
		// Either scheme, or none where the node does not authenticate
		// its clients (then the caller is User:ANONYMOUS); each route
		// checks the ACLs of its Kafka equivalent.
		"security": []map[string][]string{{"basic": {}}, {"bearer": {}}, {}},
		"components": map[string]any{
			"schemas": map[string]any{"Error": errorSchema},
			"securitySchemes": map[string]any{
				"basic":  map[string]any{"type": "http", "scheme": "basic", "description": "a SCRAM user of the cluster (fjord user create) and its password"},
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "bearerFormat": "JWT", "description": "a token the node's OAUTHBEARER validator accepts"},
			},
		},
	}
}
