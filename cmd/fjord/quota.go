package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fjordmq/fjord/internal/metadata"
)

// fjord quota: client quotas over KIP-546's AlterClientQuotas and
// DescribeClientQuotas, with Kafka's entity types (user, client-id, ip)
// and keys; kafka-configs.sh --alter --add-config / --delete-config /
// --describe on --entity-type users|clients|ips is the model.
//
// Every argument is checked here, with the rules the node applies
// (metadata.ValidateQuotaEntity, ValidateQuotaValue), before anything
// is sent, so a bad key or value is named in the flag's words; and one
// entity's keys go in one AlterClientQuotas entry, which the node
// applies whole or not at all, so nothing changes when any part is bad.

const quotaKeysHelp = `Keys (Kafka's), per node: a client with a 1 MiB/s quota may send 1 MiB/s
to each node it talks to.

  producer_byte_rate        bytes per second of Produce requests
  consumer_byte_rate        bytes per second of Fetch responses
  request_percentage        handler time, in percent of one core (100 = one
                            core busy all the time; may exceed 100)
  controller_mutation_rate  partitions created or deleted per second by
                            CreateTopics, CreatePartitions and DeleteTopics
                            (KIP-599: newer clients are refused
                            THROTTLING_QUOTA_EXCEEDED while over it)
  connection_creation_rate  new connections per second from one address
                            (ip entities only, and the only key an ip
                            entity takes; past it a connection is closed
                            as soon as it is accepted)

Values are numbers above 0: the byte and connection rates whole, the other
two may have a fraction (request_percentage=12.5). The two byte rates also
take a unit, as fjord serve's --log-dir-free-space-* do: B, KB, MB, GB, TB
(powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), whole numbers
only, so producer_byte_rate=1MiB is 1048576 bytes per second. There is no
zero or "unlimited": to lift a quota, delete its key.`

const quotaEntitiesHelp = `Entities (Kafka's): --user, --client-id, both together, or --ip alone;
each NAME or its -default form (<default>: every user, client id or
address without a quota of its own). Fjord does not authenticate clients
yet, so every client is the user ANONYMOUS (Kafka's name for it): a
--user-default quota covers every client, ahead of any client-id quota
for the same key (Kafka's order, below).

A client's quota for a key is the value on the most specific entity that
has the key set, in Kafka's order (U the client's user, C its client id):
  user=U,client-id=C          user=U,client-id=<default>          user=U
  user=<default>,client-id=C  user=<default>,client-id=<default>  user=<default>
  client-id=C                 client-id=<default>`

func newQuotaCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "quota",
		Short: "Set, describe and delete client quotas (producer and consumer byte rates, request time, ...)",
		Long: `Client quotas (Kafka's, KIP-546), kept in the metadata log so every node
enforces the same. A client over a quota is slowed down, not refused: its
responses carry throttle_time_ms and the node reads nothing more from its
connection for that long.

` + quotaEntitiesHelp,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	cmd.AddCommand(
		newQuotaSetCommand(&o),
		newQuotaDescribeCommand(&o),
		newQuotaDeleteCommand(&o),
	)
	return cmd
}

func newQuotaSetCommand(o *clientOptions) *cobra.Command {
	var (
		flags quotaEntityFlags
		e     metadata.QuotaEntity
		ops   []kadm.AlterClientQuotaOp
	)
	cmd := &cobra.Command{
		Use:   "set ENTITY-FLAGS KEY=VALUE...",
		Short: "Set quota keys on one entity (kafka-configs.sh --alter --add-config)",
		Long: `Set quota keys on one entity, leaving its other keys as they are
(kafka-configs.sh --alter --add-config). KEY=VALUE pairs may be separate
arguments or comma-separated, as kafka-configs.sh takes them:

  fjord quota set --client-id ingest producer_byte_rate=1048576,consumer_byte_rate=2MiB
  fjord quota set --user-default request_percentage=50
  fjord quota set --ip 10.0.0.7 connection_creation_rate=10

A bad entity, an unknown key, a key given twice or a bad value is refused
before anything is sent, and nothing changes.

` + quotaEntitiesHelp + `

` + quotaKeysHelp,
		// Bad input fails before the command connects.
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if e, err = flags.entity(cmd, true); err != nil {
				return err
			}
			ops, err = parseQuotaSets(e, args)
			return err
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			if err := alterQuotas(ctx, adm, e, ops); err != nil {
				return err
			}
			var set []string
			for _, op := range ops {
				set = append(set, op.Key+"="+formatQuotaValue(op.Value))
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "set client quotas of %s: %s\n", entityText(e), strings.Join(set, " "))
			return err
		}),
	}
	flags.add(cmd, "set quotas of")
	return cmd
}

func newQuotaDeleteCommand(o *clientOptions) *cobra.Command {
	var (
		flags quotaEntityFlags
		e     metadata.QuotaEntity
		keys  []string
	)
	cmd := &cobra.Command{
		Use:   "delete ENTITY-FLAGS KEY...",
		Short: "Delete quota keys from one entity (kafka-configs.sh --alter --delete-config)",
		Long: `Delete quota keys from one entity (kafka-configs.sh --alter
--delete-config); keys may be separate arguments or comma-separated. An
entity left with no keys is gone, and the next more general entity's
quota applies to its clients, if any.

  fjord quota delete --client-id ingest producer_byte_rate consumer_byte_rate

A key the entity does not have is refused, as kafka-configs.sh refuses
it, and then nothing is deleted: a mistyped name must not pass for done.

` + quotaEntitiesHelp,
		PreRunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if e, err = flags.entity(cmd, true); err != nil {
				return err
			}
			keys, err = parseQuotaKeys(e, args)
			return err
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			r, err := describeQuotas(ctx, adm, e, true)
			if err != nil {
				return err
			}
			var have map[string]float64
			for _, q := range r.Quotas {
				if q.text() == entityText(e) {
					have = q.Values
				}
			}
			var missing []string
			for _, k := range keys {
				if _, ok := have[k]; !ok {
					missing = append(missing, k)
				}
			}
			if len(missing) > 0 {
				has := "no quotas"
				if len(have) > 0 {
					has = "only " + strings.Join(slices.Sorted(maps.Keys(have)), ", ")
				}
				return fmt.Errorf("%s has no %s quota (it has %s); nothing deleted", entityText(e), strings.Join(missing, ", "), has)
			}
			ops := make([]kadm.AlterClientQuotaOp, len(keys))
			for i, k := range keys {
				ops[i] = kadm.AlterClientQuotaOp{Key: k, Remove: true}
			}
			if err := alterQuotas(ctx, adm, e, ops); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "deleted client quotas of %s: %s\n", entityText(e), strings.Join(keys, " "))
			return err
		}),
	}
	flags.add(cmd, "delete quotas of")
	return cmd
}

func newQuotaDescribeCommand(o *clientOptions) *cobra.Command {
	var (
		flags  quotaEntityFlags
		strict bool
		output string
		e      metadata.QuotaEntity
	)
	cmd := &cobra.Command{
		Use:   "describe [ENTITY-FLAGS]",
		Short: "List client quotas: all, or those of the entities the flags name",
		Long: `List the client quotas set: one row per entity and key.

Without entity flags, every quota. With them, the entities that have every
part the flags name (--user alice: the user alice exactly; --user-default:
the default user), whatever other parts they have: --user alice lists
user=alice and each user=alice,client-id=... entity. With --strict, only
entities with no other parts: --strict --user alice is user=alice alone,
what kafka-configs.sh --describe --entity-type users --entity-name alice
shows.

This lists what is set, not which quota applies to a client: that is the
most specific entity with the key set (below).

-o json is one document:

  {"quotas": [{"entity": [{"type": "user", "name": "alice", "default": false},
                          {"type": "client-id", "name": null, "default": true}],
               "values": {"producer_byte_rate": 1048576}}]}

entity lists the parts in the order user, client-id, ip; a default's name
is null; values maps each key to its number. Entities are sorted as the
ENTITY column is; "quotas" is [] when none match.

` + quotaEntitiesHelp,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if e, err = flags.entity(cmd, false); err != nil {
				return err
			}
			if strict && e == (metadata.QuotaEntity{}) {
				return errors.New("--strict needs an entity flag (--user, --client-id, --ip or a -default form)")
			}
			return nil
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			r, err := describeQuotas(ctx, adm, e, strict)
			if err != nil {
				return err
			}
			return printResult(cmd, output, r)
		}),
	}
	flags.add(cmd, "list quotas of")
	cmd.Flags().BoolVar(&strict, "strict", false, "only entities with no parts but those named (kafka-configs.sh's --describe)")
	addOutputFlag(cmd, &output)
	return cmd
}

// quotaEntityFlags are the entity flags every quota command takes.
type quotaEntityFlags struct {
	user, clientID, ip                      string
	userDefault, clientIDDefault, ipDefault bool
}

func (f *quotaEntityFlags) add(cmd *cobra.Command, verb string) {
	fs := cmd.Flags()
	fs.StringVar(&f.user, "user", "", verb+" user `NAME` (a principal; every client is ANONYMOUS until Fjord authenticates)")
	fs.BoolVar(&f.userDefault, "user-default", false, verb+" the default user (<default>): users without a quota of their own")
	fs.StringVar(&f.clientID, "client-id", "", verb+" client id `NAME` (the client.id a client sends)")
	fs.BoolVar(&f.clientIDDefault, "client-id-default", false, verb+" the default client id (<default>): client ids without a quota of their own")
	fs.StringVar(&f.ip, "ip", "", verb+" IP address `ADDR` (an ip entity stands alone)")
	fs.BoolVar(&f.ipDefault, "ip-default", false, verb+" the default IP address (<default>): addresses without a quota of their own")
}

// entity reads the flags into an entity, refusing the combinations
// Kafka refuses; required is false for describe, where no flag means
// every entity.
func (f *quotaEntityFlags) entity(cmd *cobra.Command, required bool) (metadata.QuotaEntity, error) {
	var e metadata.QuotaEntity
	for _, p := range []struct {
		flag string
		name string
		def  bool
		slot *metadata.QuotaName
	}{
		{"user", f.user, f.userDefault, &e.User},
		{"client-id", f.clientID, f.clientIDDefault, &e.ClientID},
		{"ip", f.ip, f.ipDefault, &e.IP},
	} {
		// Changed, not the value: --user "" is a mistake to name,
		// not the absence of the flag.
		named := cmd.Flags().Changed(p.flag)
		switch {
		case named && p.def:
			return e, fmt.Errorf("give --%s NAME or --%s-default, not both", p.flag, p.flag)
		case named && p.name == "":
			return e, fmt.Errorf("--%s: the name is empty (for the default, give --%s-default)", p.flag, p.flag)
		case named:
			*p.slot = metadata.Named(p.name)
		case p.def:
			*p.slot = metadata.DefaultName()
		}
	}
	switch {
	case e == (metadata.QuotaEntity{}):
		if !required {
			return e, nil
		}
		return e, errors.New("name the entity: --user, --client-id (or both), or --ip, each NAME or its -default form")
	case e.IP.Set && (e.User.Set || e.ClientID.Set):
		return e, errors.New("--ip cannot be combined with --user or --client-id: an ip entity stands alone (Kafka's rule)")
	case e.IP.Set && !e.IP.Default:
		addr, err := netip.ParseAddr(e.IP.Name)
		if err != nil {
			return e, fmt.Errorf("--ip %s: not an IP address (want a literal such as 10.0.0.7 or 2001:db8::1)", quoteValue(e.IP.Name))
		}
		// One address, one entity, as the node keeps it: ::ffff:10.0.0.7
		// is 10.0.0.7.
		e.IP.Name = metadata.CanonicalQuotaIP(addr)
	}
	// The node's own rules (name length, UTF-8) as the last word, so
	// nothing it would refuse is sent.
	return e, metadata.ValidateQuotaEntity(e)
}

// splitQuotaArgs splits the KEY=VALUE or KEY arguments at commas (an
// argument may hold several, as kafka-configs.sh's --add-config does).
func splitQuotaArgs(args []string, what string) ([]string, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no keys given: want %s", what)
	}
	var out []string
	for _, a := range args {
		for _, entry := range strings.Split(a, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				return nil, fmt.Errorf("argument %s has an empty entry: want %s", quoteValue(a), what)
			}
			out = append(out, entry)
		}
	}
	return out, nil
}

// checkQuotaKey refuses a key the entity does not take (unknown, or of
// the other kind: connection_creation_rate is an ip entity's only key)
// or one given twice.
func checkQuotaKey(e metadata.QuotaEntity, key string, seen map[string]bool) error {
	// The value is checked later; 1 is valid for every key.
	if err := metadata.ValidateQuotaValue(e, key, 1); err != nil {
		return err
	}
	if seen[key] {
		return fmt.Errorf("%s given twice", key)
	}
	seen[key] = true
	return nil
}

// parseQuotaSets reads set's KEY=VALUE arguments.
func parseQuotaSets(e metadata.QuotaEntity, args []string) ([]kadm.AlterClientQuotaOp, error) {
	const want = "KEY=VALUE, e.g. producer_byte_rate=1048576"
	entries, err := splitQuotaArgs(args, want)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var ops []kadm.AlterClientQuotaOp
	for _, entry := range entries {
		k, raw, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: want %s", quoteValue(entry), want)
		}
		if err := checkQuotaKey(e, k, seen); err != nil {
			return nil, err
		}
		v, err := parseQuotaValue(k, raw)
		if err != nil {
			return nil, err
		}
		// The maximum, and whole numbers for the byte and connection
		// rates: the node's rule.
		if err := metadata.ValidateQuotaValue(e, k, v); err != nil {
			return nil, err
		}
		ops = append(ops, kadm.AlterClientQuotaOp{Key: k, Value: v})
	}
	return ops, nil
}

// parseQuotaKeys reads delete's KEY arguments.
func parseQuotaKeys(e metadata.QuotaEntity, args []string) ([]string, error) {
	entries, err := splitQuotaArgs(args, "key names, e.g. producer_byte_rate")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, k := range entries {
		if strings.Contains(k, "=") {
			return nil, fmt.Errorf("%s: delete takes key names, not KEY=VALUE", quoteValue(k))
		}
		if err := checkQuotaKey(e, k, seen); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// parseQuotaValue reads one value: a number above 0, or for a byte rate
// also a whole number of bytes with a unit (metadata.ParseFreeSpace,
// without its percentages, which mean nothing for a rate).
func parseQuotaValue(key, raw string) (float64, error) {
	s := strings.TrimSpace(raw)
	byteRate := key == metadata.QuotaProducerByteRate || key == metadata.QuotaConsumerByteRate
	v, err := strconv.ParseFloat(s, 64)
	if errors.Is(err, strconv.ErrRange) {
		err = nil // ±Inf or 0, refused below in those words
	}
	if err != nil && byteRate && !strings.HasSuffix(s, "%") {
		if fs, ferr := metadata.ParseFreeSpace(s); ferr == nil {
			v, err = float64(fs.Bytes), nil
		}
	}
	example := "e.g. 50"
	if byteRate {
		example = "e.g. 1048576 or 1MiB"
	}
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s=%s: want a number above 0, %s", key, quoteValue(raw), example)
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Errorf("%s=%s: want a finite number above 0, %s", key, quoteValue(raw), example)
	case v <= 0:
		return 0, fmt.Errorf("%s=%s: want a number above 0 (to lift the quota, fjord quota delete the key)", key, quoteValue(raw))
	}
	return v, nil
}

// alterQuotas sends one entity's ops as one AlterClientQuotas entry: the
// node applies all of them or, refusing any, none.
func alterQuotas(ctx context.Context, adm *kadm.Client, e metadata.QuotaEntity, ops []kadm.AlterClientQuotaOp) error {
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadmEntity(e), Ops: ops}})
	if err == nil {
		err = alteredErr(res)
	}
	if err != nil {
		return fmt.Errorf("altering client quotas of %s: %w", entityText(e), err)
	}
	return nil
}

// alteredErr is the node's answer to a one-entry AlterClientQuotas: its
// refusal in its own words (kafkaError), or nil.
func alteredErr(res kadm.AlteredClientQuotas) error {
	if len(res) != 1 {
		return fmt.Errorf("the node answered %d entries for 1", len(res))
	}
	if res[0].Err != nil {
		return kafkaError(res[0].Err, res[0].ErrMessage)
	}
	return nil
}

// kadmEntity is e as the protocol names it: a null name is the default.
func kadmEntity(e metadata.QuotaEntity) kadm.ClientQuotaEntity {
	var out kadm.ClientQuotaEntity
	for _, p := range entityParts(e) {
		out = append(out, kadm.ClientQuotaEntityComponent{Type: p.Type, Name: p.Name})
	}
	return out
}

// entityParts lists e's parts in Kafka's order.
func entityParts(e metadata.QuotaEntity) []quotaEntityPart {
	var parts []quotaEntityPart
	for _, p := range []struct {
		typ string
		n   metadata.QuotaName
	}{{metadata.QuotaEntityUser, e.User}, {metadata.QuotaEntityClientID, e.ClientID}, {metadata.QuotaEntityIP, e.IP}} {
		switch {
		case !p.n.Set:
		case p.n.Default:
			parts = append(parts, quotaEntityPart{Type: p.typ, Default: true})
		default:
			name := p.n.Name
			parts = append(parts, quotaEntityPart{Type: p.typ, Name: &name})
		}
	}
	return parts
}

// describeQuotas asks for the quotas of the entities that have e's parts
// (all with none), and with strict no others.
func describeQuotas(ctx context.Context, adm *kadm.Client, e metadata.QuotaEntity, strict bool) (quotaReport, error) {
	var comps []kadm.DescribeClientQuotaComponent
	for _, p := range entityParts(e) {
		c := kadm.DescribeClientQuotaComponent{Type: p.Type, MatchName: p.Name}
		if p.Default {
			c.MatchType = 1 // the default; 0, exact, needs the name
		}
		comps = append(comps, c)
	}
	described, err := adm.DescribeClientQuotas(ctx, strict, comps)
	if err != nil {
		var em *kadm.ErrAndMessage
		if errors.As(err, &em) {
			err = kafkaError(em.Err, em.ErrMessage)
		}
		return quotaReport{}, fmt.Errorf("describing client quotas: %w", err)
	}
	r := quotaReport{Quotas: []quotaEntry{}}
	for _, d := range described {
		q := quotaEntry{Entity: []quotaEntityPart{}, Values: map[string]float64{}}
		for _, c := range d.Entity {
			q.Entity = append(q.Entity, quotaEntityPart{Type: c.Type, Name: c.Name, Default: c.Name == nil})
		}
		// Kafka's order whatever order the node sent them in, so the
		// text and the sort below are stable.
		slices.SortStableFunc(q.Entity, func(a, b quotaEntityPart) int { return cmp.Compare(typeRank(a.Type), typeRank(b.Type)) })
		for _, v := range d.Values {
			q.Values[v.Key] = v.Value
		}
		r.Quotas = append(r.Quotas, q)
	}
	slices.SortFunc(r.Quotas, func(a, b quotaEntry) int { return strings.Compare(a.text(), b.text()) })
	return r, nil
}

func typeRank(typ string) int {
	switch typ {
	case metadata.QuotaEntityUser:
		return 0
	case metadata.QuotaEntityClientID:
		return 1
	case metadata.QuotaEntityIP:
		return 2
	}
	return 3
}

// quotaReport is quota describe -o json.
type quotaReport struct {
	Quotas []quotaEntry `json:"quotas"`
}

type quotaEntry struct {
	Entity []quotaEntityPart  `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// quotaEntityPart is one type's part of an entity; Name is null for the
// default (as on the wire), and Default says so for readers who would
// rather not rely on null.
type quotaEntityPart struct {
	Type    string  `json:"type"`
	Name    *string `json:"name"`
	Default bool    `json:"default"`
}

// text is the entity as the ENTITY column shows it.
func (q quotaEntry) text() string { return partsText(q.Entity) }

// entityText is e as the ENTITY column and messages show it.
func entityText(e metadata.QuotaEntity) string { return partsText(entityParts(e)) }

// partsText is "user=alice,client-id=<default>". A name that could be
// read otherwise (a comma, '=', a quote, spaces, something unprintable,
// or one spelled "<default>", which a client id may be) is quoted, so
// every entity has one text and the table stays one row per line.
func partsText(parts []quotaEntityPart) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.Type)
		b.WriteByte('=')
		switch {
		case p.Name == nil:
			b.WriteString("<default>")
		case needsQuoting(*p.Name):
			b.WriteString(strconv.Quote(*p.Name))
		default:
			b.WriteString(*p.Name)
		}
	}
	return b.String()
}

func needsQuoting(name string) bool {
	return name == "" || name == "<default>" || !utf8.ValidString(name) || strings.ContainsAny(name, `,="`) ||
		strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsGraphic(r) }) >= 0
}

// formatQuotaValue prints a value as the shortest decimal that reads
// back exactly: a whole number without decimals (1048576, not 1.048576e+06
// or 1048576.0), a fraction as it is (12.5). This covers
// metadata.QuotaKeyIsWhole's keys without rounding a fraction another
// Kafka node may hold under one of them.
func formatQuotaValue(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (r quotaReport) printText(out io.Writer) error {
	if len(r.Quotas) == 0 {
		_, err := fmt.Fprintln(out, "No client quotas.")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ENTITY\tKEY\tVALUE")
	for _, q := range r.Quotas {
		for _, k := range slices.Sorted(maps.Keys(q.Values)) {
			fmt.Fprintf(w, "%s\t%s\t%s\n", q.text(), k, formatQuotaValue(q.Values[k]))
		}
	}
	return w.Flush()
}
