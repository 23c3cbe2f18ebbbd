package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// topic reassign: Kafka's kafka-reassign-partitions.sh, with its option
// names and its plan file (--reassignment-json-file, --execute,
// --verify, --cancel, --list, --additional), over
// AlterPartitionReassignments and ListPartitionReassignments (KIP-455).
//
// The plan is checked whole before anything is sent: a plan with one bad
// entry moves nothing. --execute, like Kafka's tool, refuses to start
// while other reassignments are in progress unless --additional is
// given, and prints the partitions' current replicas as a plan first, to
// roll back with. --throttle sets follower.replication.throttled.rate
// on each broker the plan adds a replica to, before the moves start, and
// --verify removes it from every broker once no reassignment is left in
// progress, as Kafka's tool does. Not yet: --replica-alter-log-dirs-throttle
// (refused, never ignored), --generate, and log directories other than
// "any".

// maxPlanBytes bounds a plan file: ample for every partition of a large
// cluster, and a file that is not a plan fails fast.
const maxPlanBytes = 64 << 20

func newTopicReassignCommand(o *clientOptions) *cobra.Command {
	var (
		planPath                          string
		execute, verify, cancel, listOnly bool
		additional                        bool
		throttle                          int64
		logDirThrottle                    string
		output                            string
	)
	cmd := &cobra.Command{
		Use:   "reassign",
		Short: "Move partitions to other brokers: start, follow, cancel and list reassignments",
		Long: `Move partitions to other brokers (Kafka's kafka-reassign-partitions.sh).

The plan is Kafka's reassignment JSON, from a file or "-" for stdin:

  {"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[4,2,3]}]}

Each partition's replicas are its target brokers, the first its preferred
leader. A partition keeps its replicas until the new ones have caught up
and joined the ISR, so it never has fewer than before; a replica leaving
it deletes its copy once the move completes.

  --execute  start the plan's reassignments. The partitions' current
             replicas are printed first, as a plan to roll back with.
             Refused while other reassignments are in progress, unless
             --additional is given. With --throttle BYTES, each broker
             that gets a new replica copies for it at most BYTES per
             second (follower.replication.throttled.rate); other
             replication is never throttled.
  --verify   show where each of the plan's partitions stands: complete,
             in progress, or not at its target. Fails until all are
             complete, so a script can wait on it. Once none is in
             progress in the cluster, it removes the throttle.
  --cancel   stop the plan's reassignments that are in progress; each
             partition goes back to the replicas it had.
  --list     every reassignment in progress (no plan).

The plan is checked before anything is sent (its version, every entry's
topic, partition and replicas, a broker named twice, a partition listed
twice): a plan with a bad entry moves nothing. What only the cluster
knows (the topic, the partition, whether the brokers are registered) is
the node's answer, printed per partition.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			// Refused first, so a throttle is never silently dropped.
			if cmd.Flags().Changed("replica-alter-log-dirs-throttle") {
				return errors.New("--replica-alter-log-dirs-throttle is not supported: Fjord has one log directory per node, so there are no moves between directories to throttle")
			}
			actions := givenFlags(cmd, "execute", "verify", "cancel", "list")
			if cmd.Flags().Changed("throttle") {
				switch {
				case !execute:
					return errors.New("--throttle goes with --execute (--verify removes it once the moves are done)")
				case throttle < 1:
					return fmt.Errorf("--throttle %d: want the bytes per second each receiving broker may copy, at least 1", throttle)
				}
			}
			switch {
			case len(actions) == 0:
				return errors.New("give one action: --execute, --verify, --cancel (each with --reassignment-json-file) or --list")
			case len(actions) > 1:
				return fmt.Errorf("give one action, not %s", strings.Join(actions, " and "))
			case additional && !execute:
				return errors.New("--additional goes with --execute")
			case listOnly && planPath != "":
				return errors.New("--list lists every reassignment in progress: it takes no --reassignment-json-file")
			case !listOnly && planPath == "":
				return fmt.Errorf("%s needs --reassignment-json-file FILE (or - for stdin)", actions[0])
			}
			var plan []planPartition
			if !listOnly {
				var err error
				if plan, err = readReassignmentPlan(cmd.InOrStdin(), planPath); err != nil {
					return err
				}
			}
			ctx, cancelCtx := context.WithTimeout(cmd.Context(), requestTimeout)
			defer cancelCtx()
			cl, err := o.connect(ctx)
			if err != nil {
				return err
			}
			defer cl.Close()
			switch {
			case execute:
				return executeReassignment(ctx, cmd, cl, plan, reassignOptions{additional: additional, throttle: throttle}, planPath, output)
			case verify:
				return verifyReassignment(ctx, cmd, cl, plan, output)
			case cancel:
				return cancelReassignment(ctx, cmd, cl, plan, output)
			}
			return listReassignments(ctx, cmd, cl, output)
		},
	}
	f := cmd.Flags()
	f.StringVar(&planPath, "reassignment-json-file", "", `the plan: Kafka's reassignment JSON ({"version":1,"partitions":[...]}), a file or - for stdin`)
	f.BoolVar(&execute, "execute", false, "start the plan's reassignments")
	f.BoolVar(&verify, "verify", false, "show where the plan's partitions stand; fails until all are at their target")
	f.BoolVar(&cancel, "cancel", false, "cancel the plan's reassignments in progress")
	f.BoolVar(&listOnly, "list", false, "list every reassignment in progress")
	f.BoolVar(&additional, "additional", false, "with --execute: start even though other reassignments are in progress")
	f.Int64Var(&throttle, "throttle", 0, "with --execute: bytes per second each broker receiving a replica may copy (follower.replication.throttled.rate)")
	f.StringVar(&logDirThrottle, "replica-alter-log-dirs-throttle", "", "not supported (refused): one log directory per node")
	addOutputFlag(cmd, &output)
	return cmd
}

// planPartition is one entry of a reassignment plan.
type planPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

func (p planPartition) name() string { return fmt.Sprintf("%s-%d", p.Topic, p.Partition) }

func (p planPartition) key() partitionKey { return partitionKey{p.Topic, p.Partition} }

// partitionKey is a topic and partition, as a map key.
type partitionKey struct {
	topic     string
	partition int32
}

// reassignmentPlanJSON is the plan file's shape (Kafka's version 1),
// printed for rollback too.
type reassignmentPlanJSON struct {
	Version    int             `json:"version"`
	Partitions []planPartition `json:"partitions"`
}

// readReassignmentPlan reads and checks the plan at path ("-": stdin).
func readReassignmentPlan(stdin io.Reader, path string) ([]planPartition, error) {
	var data []byte
	var err error
	name := path
	if path == "-" {
		name = "the plan on stdin"
		data, err = io.ReadAll(io.LimitReader(stdin, maxPlanBytes+1))
	} else {
		var f *os.File
		if f, err = os.Open(path); err == nil {
			data, err = io.ReadAll(io.LimitReader(f, maxPlanBytes+1))
			f.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading --reassignment-json-file: %w", err)
	}
	if len(data) > maxPlanBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB: not a reassignment plan", name, maxPlanBytes>>20)
	}
	return parseReassignmentPlan(name, data)
}

// parseReassignmentPlan checks a plan whole, and names the first bad
// entry: partitions[i] with its topic and partition when they are known.
// Kafka's tool refuses the same plans (an empty list, an empty replica
// list, a broker twice, a partition twice); this one also refuses what
// Kafka's leaves to the cluster or ignores: negative ids, unknown
// fields (a misspelt "replica" is not a plan with no replicas), and log
// directories other than "any".
func parseReassignmentPlan(name string, data []byte) ([]planPartition, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("reassignment plan %s: "+format, append([]any{name}, args...)...)
	}
	var doc struct {
		Version    any               `json:"version"`
		Partitions []json.RawMessage `json:"partitions"`
	}
	if err := strictJSON(data, &doc); err != nil {
		return nil, bad("%s", describeJSONError(data, err))
	}
	// Kafka takes a plan without a version as version 1.
	if doc.Version != nil {
		if n, ok := doc.Version.(json.Number); !ok || n.String() != "1" {
			return nil, bad("version %s is not supported: the plan format is version 1", jsonText(doc.Version))
		}
	}
	if len(doc.Partitions) == 0 {
		return nil, bad(`no partitions to reassign: want {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}`)
	}
	plan := make([]planPartition, 0, len(doc.Partitions))
	first := make(map[partitionKey]int, len(doc.Partitions))
	for i, raw := range doc.Partitions {
		var e struct {
			Topic     *string   `json:"topic"`
			Partition any       `json:"partition"`
			Replicas  *[]any    `json:"replicas"`
			LogDirs   *[]string `json:"log_dirs"`
		}
		entry := fmt.Sprintf("partitions[%d]", i)
		if err := strictJSON(raw, &e); err != nil {
			return nil, bad("%s: %s", entry, describeJSONError(raw, err))
		}
		if e.Topic == nil || *e.Topic == "" {
			return nil, bad(`%s: no "topic"`, entry)
		}
		if e.Partition == nil {
			return nil, bad(`%s (topic %s): no "partition"`, entry, *e.Topic)
		}
		partition, ok := jsonInt32(e.Partition)
		if !ok {
			return nil, bad(`%s (topic %s): "partition" %s: want a partition number, 0 or more`, entry, *e.Topic, jsonText(e.Partition))
		}
		p := planPartition{Topic: *e.Topic, Partition: partition}
		entry = fmt.Sprintf("partitions[%d] (%s)", i, p.name())
		if j, ok := first[p.key()]; ok {
			return nil, bad("%s: the partition is listed twice (first at partitions[%d])", entry, j)
		}
		first[p.key()] = i
		if e.Replicas == nil {
			return nil, bad(`%s: no "replicas": give the target brokers, e.g. "replicas":[1,2,3]`, entry)
		}
		if len(*e.Replicas) == 0 {
			return nil, bad(`%s: "replicas" is empty: a partition needs at least one replica (to stop a reassignment, use --cancel)`, entry)
		}
		for _, n := range *e.Replicas {
			id, ok := jsonInt32(n)
			if !ok {
				return nil, bad(`%s: "replicas": %s is not a broker id (0 or more)`, entry, jsonText(n))
			}
			if slices.Contains(p.Replicas, id) {
				return nil, bad(`%s: "replicas" names broker %d twice`, entry, id)
			}
			p.Replicas = append(p.Replicas, id)
		}
		if e.LogDirs != nil {
			if len(*e.LogDirs) != len(p.Replicas) {
				return nil, bad(`%s: "log_dirs" has %d entries for %d replicas`, entry, len(*e.LogDirs), len(p.Replicas))
			}
			for _, d := range *e.LogDirs {
				if d != "any" {
					return nil, bad(`%s: "log_dirs" %q: only "any" is supported (a Fjord broker has one log directory)`, entry, d)
				}
			}
		}
		plan = append(plan, p)
	}
	return plan, nil
}

// jsonInt32 is v as an int32 of 0 or more, if it is a JSON number that
// is one.
func jsonInt32(v any) (int32, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := strconv.ParseInt(n.String(), 10, 32)
	return int32(i), err == nil && i >= 0
}

// jsonText is v as it reads in JSON, for a message.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

// strictJSON decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("empty: want a JSON object")
		}
		return err
	}
	if dec.More() {
		return errors.New("more than one JSON value")
	}
	return nil
}

// describeJSONError says what is wrong with data, with the line and
// column of a syntax error.
func describeJSONError(data []byte, err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		// Offset is just past the byte that broke the syntax.
		before := data[:max(min(int(syntax.Offset)-1, len(data)), 0)]
		line := bytes.Count(before, []byte("\n")) + 1
		col := len(before) - bytes.LastIndexByte(before, '\n')
		return fmt.Sprintf("not valid JSON: %v (line %d, column %d)", syntax, line, col)
	case errors.As(err, &typ):
		if typ.Field == "" {
			return fmt.Sprintf("want a JSON object, not %s", withArticle(typ.Value))
		}
		return fmt.Sprintf("%q is %s, want %s", typ.Field, withArticle(typ.Value), withArticle(jsonKind(typ.Type.String())))
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// withArticle is "a list", "an object".
func withArticle(noun string) string {
	if strings.ContainsAny(noun[:min(1, len(noun))], "aeiou") {
		return "an " + noun
	}
	return "a " + noun
}

// jsonKind names a Go type of the plan's structs in JSON's words.
func jsonKind(goType string) string {
	switch {
	case strings.Contains(goType, "[]"):
		return "list"
	case strings.Contains(goType, "Number"):
		return "number"
	case strings.Contains(goType, "string"):
		return "string"
	}
	return "JSON object"
}

// planTopics is the request's topics for plan, each once, with its
// partitions in plan order.
func planTopics(plan []planPartition) ([]string, map[string][]planPartition) {
	var order []string
	by := map[string][]planPartition{}
	for _, p := range plan {
		if _, ok := by[p.Topic]; !ok {
			order = append(order, p.Topic)
		}
		by[p.Topic] = append(by[p.Topic], p)
	}
	return order, by
}

// alterReassignments sends one AlterPartitionReassignments of plan's
// partitions (cancel: null replicas) and returns each partition's error
// (nil: accepted), in plan order.
func alterReassignments(ctx context.Context, cl *kgo.Client, plan []planPartition, cancel bool) ([]error, error) {
	req := kmsg.NewPtrAlterPartitionAssignmentsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	order, by := planTopics(plan)
	for _, topic := range order {
		rt := kmsg.NewAlterPartitionAssignmentsRequestTopic()
		rt.Topic = topic
		for _, p := range by[topic] {
			rp := kmsg.NewAlterPartitionAssignmentsRequestTopicPartition()
			rp.Partition = p.Partition
			if !cancel {
				rp.Replicas = p.Replicas
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, kafkaError(err, unptr(resp.ErrorMessage))
	}
	answers := map[partitionKey]error{}
	answered := map[partitionKey]bool{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			k := partitionKey{t.Topic, p.Partition}
			answered[k] = true
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				answers[k] = kafkaError(err, unptr(p.ErrorMessage))
			}
		}
	}
	errs := make([]error, len(plan))
	for i, p := range plan {
		k := p.key()
		errs[i] = answers[k]
		if !answered[k] {
			errs[i] = errors.New("the node's answer leaves this partition out")
		}
	}
	return errs, nil
}

// ongoing is one reassignment in progress, as listed.
type ongoing struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	Adding    []int32 `json:"adding_replicas"`
	Removing  []int32 `json:"removing_replicas"`
}

// target is where an in-progress reassignment goes: its replicas
// without the ones being removed.
func (o ongoing) target() []int32 {
	out := []int32{}
	for _, r := range o.Replicas {
		if !slices.Contains(o.Removing, r) {
			out = append(out, r)
		}
	}
	return out
}

// listOngoing lists the reassignments in progress: of plan's partitions,
// or every one for a nil plan.
func listOngoing(ctx context.Context, cl *kgo.Client, plan []planPartition) (map[partitionKey]ongoing, []ongoing, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = int32(requestTimeout.Milliseconds())
	if plan != nil {
		req.Topics = []kmsg.ListPartitionReassignmentsRequestTopic{}
		order, by := planTopics(plan)
		for _, topic := range order {
			rt := kmsg.NewListPartitionReassignmentsRequestTopic()
			rt.Topic = topic
			for _, p := range by[topic] {
				rt.Partitions = append(rt.Partitions, p.Partition)
			}
			req.Topics = append(req.Topics, rt)
		}
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, nil, fmt.Errorf("listing reassignments: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, nil, fmt.Errorf("listing reassignments: %w", kafkaError(err, unptr(resp.ErrorMessage)))
	}
	by := map[partitionKey]ongoing{}
	all := []ongoing{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			o := ongoing{Topic: t.Topic, Partition: p.Partition, Replicas: nonNil(p.Replicas), Adding: nonNil(p.AddingReplicas), Removing: nonNil(p.RemovingReplicas)}
			by[partitionKey{o.Topic, o.Partition}] = o
			all = append(all, o)
		}
	}
	slices.SortFunc(all, func(a, b ongoing) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	return by, all, nil
}

// currentReplicas returns each of plan's partitions' replicas from
// Metadata; a partition (or topic) that does not exist is left out.
func currentReplicas(ctx context.Context, cl *kgo.Client, plan []planPartition) (map[partitionKey][]int32, error) {
	order, _ := planTopics(plan)
	topics, err := kadm.NewClient(cl).ListTopics(ctx, order...)
	if err != nil {
		return nil, fmt.Errorf("reading the partitions' replicas: %w", err)
	}
	out := map[partitionKey][]int32{}
	for name, d := range topics {
		if d.Err != nil {
			continue
		}
		for _, p := range d.Partitions {
			out[partitionKey{name, p.Partition}] = p.Replicas
		}
	}
	return out, nil
}

func unptr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// reassignOutcome is one partition's line of --execute or --cancel.
type reassignOutcome struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	// Result is "started" (--execute), "cancelled" or "not in
	// progress" (--cancel), or the Kafka error's name.
	Result  string `json:"result"`
	Message string `json:"message,omitempty"`
}

// failed reports whether the outcome is a refusal.
func (o reassignOutcome) failed() bool {
	return o.Result != "started" && o.Result != "cancelled" && o.Result != "not in progress"
}

func outcome(p planPartition, ok string, err error) reassignOutcome {
	out := reassignOutcome{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas, Result: ok}
	if err != nil {
		var ke *kerr.Error
		out.Result, out.Message = "error", err.Error()
		if errors.As(err, &ke) {
			out.Result = ke.Message
			out.Message = strings.TrimPrefix(strings.TrimPrefix(err.Error(), ke.Message), ": ")
		}
	}
	return out
}

// failures is the command's error for outcomes with refusals: how many,
// and the first in full.
func failures(what string, outcomes []reassignOutcome) error {
	n := 0
	var first *reassignOutcome
	for i := range outcomes {
		if outcomes[i].failed() {
			n++
			if first == nil {
				first = &outcomes[i]
			}
		}
	}
	if n == 0 {
		return nil
	}
	detail := first.Result
	if first.Message != "" {
		detail += ": " + first.Message
	}
	name := fmt.Sprintf("%s-%d", first.Topic, first.Partition)
	if !strings.Contains(detail, name) {
		detail = name + ": " + detail
	}
	return fmt.Errorf("%d of %d %s (%s)", n, len(outcomes), what, detail)
}

// reassignExecution is topic reassign --execute -o json.
type reassignExecution struct {
	// Current is each existing partition's replicas before the change:
	// a plan to roll back with.
	Current    reassignmentPlanJSON `json:"current"`
	Partitions []reassignOutcome    `json:"partitions"`
	// Throttle is the bytes per second set on ThrottledBrokers (the
	// ones the plan adds replicas to) before the moves started; 0: none.
	Throttle         int64   `json:"throttle,omitempty"`
	ThrottledBrokers []int32 `json:"throttled_brokers,omitempty"`
	// planPath is the plan's file, for the hint to --verify.
	planPath string
}

// reassignOptions are --execute's modifiers.
type reassignOptions struct {
	additional bool
	throttle   int64 // bytes per second; 0: none
}

func (r reassignExecution) printText(out io.Writer) error {
	cur, err := json.Marshal(r.Current)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Current replicas of these partitions (save this plan to roll back with --execute):\n%s\n\n", cur)
	if r.Throttle > 0 {
		fmt.Fprintf(out, "Throttle: brokers %s copy for their new replicas at most %d bytes per second (%s); --verify removes it once the moves are done.\n\n",
			ids(r.ThrottledBrokers), r.Throttle, followerThrottleConfig)
	}
	if err := printOutcomes(out, r.Partitions); err != nil {
		return err
	}
	for _, p := range r.Partitions {
		if p.Result == "started" {
			path := r.planPath
			if path == "-" {
				path = "FILE"
			}
			_, err := fmt.Fprintf(out, "\nFollow them with: fjord topic reassign --verify --reassignment-json-file %s\n", path)
			return err
		}
	}
	return nil
}

func printOutcomes(out io.Writer, outcomes []reassignOutcome) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tREPLICAS\tRESULT\tMESSAGE")
	for _, o := range outcomes {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", o.Topic, o.Partition, ids(o.Replicas), o.Result, o.Message)
	}
	return w.Flush()
}

func executeReassignment(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, plan []planPartition, opts reassignOptions, planPath, output string) error {
	additional := opts.additional
	_, inProgress, err := listOngoing(ctx, cl, nil)
	if err != nil {
		return err
	}
	if len(inProgress) > 0 && !additional {
		what := fmt.Sprintf("%d reassignments are", len(inProgress))
		if len(inProgress) == 1 {
			what = "1 reassignment is"
		}
		return fmt.Errorf("%s in progress (see --list): give --additional to start this plan as well", what)
	}
	adding := map[partitionKey][]int32{}
	for _, o := range inProgress {
		adding[partitionKey{o.Topic, o.Partition}] = o.Adding
	}
	current, err := currentReplicas(ctx, cl, plan)
	if err != nil {
		return err
	}
	r := reassignExecution{Current: reassignmentPlanJSON{Version: 1, Partitions: []planPartition{}}, planPath: planPath}
	for _, p := range plan {
		k := p.key()
		replicas, ok := current[k]
		if !ok {
			continue
		}
		// Mid-reassignment the replicas include the ones being added;
		// rolling back means the ones it had.
		var before []int32
		for _, b := range replicas {
			if !slices.Contains(adding[k], b) {
				before = append(before, b)
			}
		}
		r.Current.Partitions = append(r.Current.Partitions, planPartition{Topic: p.Topic, Partition: p.Partition, Replicas: nonNil(before)})
	}
	if r.Throttle, r.ThrottledBrokers, err = throttleReceivers(ctx, cl, opts.throttle, plan, current); err != nil {
		return err
	}
	errs, err := alterReassignments(ctx, cl, plan, false)
	if err != nil {
		return fmt.Errorf("starting the reassignments: %w", err)
	}
	for i, p := range plan {
		r.Partitions = append(r.Partitions, outcome(p, "started", errs[i]))
	}
	if err := printResult(cmd, output, r); err != nil {
		return err
	}
	return failures("reassignments could not be started", r.Partitions)
}

// followerThrottleConfig is the dynamic broker config the throttle is.
const followerThrottleConfig = "follower.replication.throttled.rate"

// receivingBrokers are the brokers plan adds a replica to: in a
// partition's target and not among its replicas now, sorted.
func receivingBrokers(plan []planPartition, current map[partitionKey][]int32) []int32 {
	var out []int32
	for _, p := range plan {
		for _, b := range p.Replicas {
			if !slices.Contains(current[p.key()], b) && !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	slices.Sort(out)
	return out
}

// throttleReceivers sets the throttle (rate > 0; 0 does nothing) on
// the brokers plan adds replicas to, before the moves start, so the
// first byte copied is throttled. It returns the rate set (0 when no
// broker receives a replica) and the brokers.
func throttleReceivers(ctx context.Context, cl *kgo.Client, rate int64, plan []planPartition, current map[partitionKey][]int32) (int64, []int32, error) {
	if rate <= 0 {
		return 0, nil, nil
	}
	brokers := receivingBrokers(plan, current)
	if len(brokers) == 0 {
		return 0, nil, nil
	}
	return rate, brokers, setThrottle(ctx, cl, rate, brokers)
}

// setThrottle sets (rate > 0) or removes (rate 0) the throttle on
// brokers.
func setThrottle(ctx context.Context, cl *kgo.Client, rate int64, brokers []int32) error {
	if len(brokers) == 0 {
		return nil
	}
	c := kadm.AlterConfig{Op: kadm.DeleteConfig, Name: followerThrottleConfig}
	verb := "removing"
	if rate > 0 {
		v := strconv.FormatInt(rate, 10)
		c, verb = kadm.AlterConfig{Op: kadm.SetConfig, Name: followerThrottleConfig, Value: &v}, "setting"
	}
	resps, err := kadm.NewClient(cl).AlterBrokerConfigs(ctx, []kadm.AlterConfig{c}, brokers...)
	if err == nil {
		for _, r := range resps {
			if r.Err != nil {
				err = fmt.Errorf("broker %s: %w%s", r.Name, r.Err, messageSuffix(r.ErrMessage))
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%s the reassignment throttle (%s): %w", verb, followerThrottleConfig, err)
	}
	return nil
}

func messageSuffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// reassignCancellation is topic reassign --cancel -o json.
type reassignCancellation struct {
	Partitions []reassignOutcome `json:"partitions"`
}

func (r reassignCancellation) printText(out io.Writer) error {
	return printOutcomes(out, r.Partitions)
}

func cancelReassignment(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, plan []planPartition, output string) error {
	// Only what is in progress is cancelled, as Kafka's tool does: a
	// cancel of a finished move is not an error.
	ongoingNow, _, err := listOngoing(ctx, cl, plan)
	if err != nil {
		return err
	}
	var active []planPartition
	for _, p := range plan {
		if _, ok := ongoingNow[p.key()]; ok {
			active = append(active, p)
		}
	}
	var errs []error
	if len(active) > 0 {
		if errs, err = alterReassignments(ctx, cl, active, true); err != nil {
			return fmt.Errorf("cancelling the reassignments: %w", err)
		}
	}
	r := reassignCancellation{Partitions: []reassignOutcome{}}
	next := 0
	for _, p := range plan {
		o := reassignOutcome{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas, Result: "not in progress"}
		if next < len(active) && active[next].Topic == p.Topic && active[next].Partition == p.Partition {
			o = outcome(p, "cancelled", errs[next])
			next++
		}
		r.Partitions = append(r.Partitions, o)
	}
	if err := printResult(cmd, output, r); err != nil {
		return err
	}
	return failures("reassignments could not be cancelled", r.Partitions)
}

// reassignVerification is topic reassign --verify -o json.
type reassignVerification struct {
	Partitions []partitionReassignState `json:"partitions"`
	// ThrottleRemovedFrom are the brokers whose throttle was removed
	// (every registered one, once no reassignment is in progress).
	ThrottleRemovedFrom []int32 `json:"throttle_removed_from,omitempty"`
}

type partitionReassignState struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Status is "complete", "in progress", "in progress to other
	// replicas" (another plan replaced this one), "not at target" (no
	// reassignment in progress, and the replicas are not the target's)
	// or "no such partition".
	Status string `json:"status"`
	// Replicas are the partition's now (null if it does not exist);
	// Target the plan's; Adding and Removing those of the reassignment
	// in progress ([] when none is).
	Replicas []int32 `json:"replicas"`
	Target   []int32 `json:"target"`
	Adding   []int32 `json:"adding_replicas"`
	Removing []int32 `json:"removing_replicas"`
}

func (r reassignVerification) printText(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tREPLICAS\tTARGET\tADDING\tREMOVING\tSTATUS")
	for _, p := range r.Partitions {
		replicas := "-"
		if p.Replicas != nil {
			replicas = orNone(ids(p.Replicas))
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, replicas, ids(p.Target),
			orNone(ids(p.Adding)), orNone(ids(p.Removing)), p.Status)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(r.ThrottleRemovedFrom) > 0 {
		_, err := fmt.Fprintf(out, "\nNo reassignment is in progress: removed the throttle (%s) from brokers %s.\n", followerThrottleConfig, ids(r.ThrottleRemovedFrom))
		return err
	}
	return nil
}

func verifyReassignment(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, plan []planPartition, output string) error {
	ongoingNow, _, err := listOngoing(ctx, cl, plan)
	if err != nil {
		return err
	}
	current, err := currentReplicas(ctx, cl, plan)
	if err != nil {
		return err
	}
	r := reassignVerification{Partitions: []partitionReassignState{}}
	inProgress, notDone := 0, 0
	for _, p := range plan {
		k := p.key()
		s := partitionReassignState{Topic: p.Topic, Partition: p.Partition, Target: p.Replicas, Adding: []int32{}, Removing: []int32{}}
		replicas, exists := current[k]
		if exists {
			s.Replicas = nonNil(replicas)
		}
		o, moving := ongoingNow[k]
		switch {
		case moving:
			s.Replicas, s.Adding, s.Removing = o.Replicas, o.Adding, o.Removing
			s.Status = "in progress"
			if !slices.Equal(o.target(), p.Replicas) {
				s.Status = "in progress to other replicas"
			}
			inProgress++
		case !exists:
			s.Status = "no such partition"
		case slices.Equal(replicas, p.Replicas):
			s.Status = "complete"
		default:
			s.Status = "not at target"
		}
		if s.Status != "complete" {
			notDone++
		}
		r.Partitions = append(r.Partitions, s)
	}
	if notDone == 0 {
		if r.ThrottleRemovedFrom, err = clearThrottles(ctx, cl); err != nil {
			return err
		}
	}
	if err := printResult(cmd, output, r); err != nil {
		return err
	}
	switch {
	case notDone == 0:
		return nil
	case notDone == inProgress:
		return fmt.Errorf("%d of %d reassignments are still in progress", inProgress, len(plan))
	}
	return fmt.Errorf("%d of %d partitions are not at their target (%d still in progress)", notDone, len(plan), inProgress)
}

// clearThrottles removes the reassignment throttle from every
// registered broker once no reassignment is in progress in the cluster
// (another plan's may still be moving, and keeps its throttle). It
// returns the brokers it cleared, none when some move goes on.
func clearThrottles(ctx context.Context, cl *kgo.Client) ([]int32, error) {
	_, inProgress, err := listOngoing(ctx, cl, nil)
	if err != nil || len(inProgress) > 0 {
		return nil, err
	}
	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing brokers to remove the throttle from: %w", err)
	}
	ids := brokers.NodeIDs()
	slices.Sort(ids)
	return ids, setThrottle(ctx, cl, 0, ids)
}

// reassignList is topic reassign --list -o json.
type reassignList struct {
	Reassignments []ongoing `json:"reassignments"`
}

func (r reassignList) printText(out io.Writer) error {
	if len(r.Reassignments) == 0 {
		_, err := fmt.Fprintln(out, "No partition reassignments in progress.")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tREPLICAS\tADDING\tREMOVING")
	for _, o := range r.Reassignments {
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", o.Topic, o.Partition, orNone(ids(o.Replicas)), orNone(ids(o.Adding)), orNone(ids(o.Removing)))
	}
	return w.Flush()
}

func listReassignments(ctx context.Context, cmd *cobra.Command, cl *kgo.Client, output string) error {
	_, all, err := listOngoing(ctx, cl, nil)
	if err != nil {
		return err
	}
	return printResult(cmd, output, reassignList{Reassignments: all})
}
