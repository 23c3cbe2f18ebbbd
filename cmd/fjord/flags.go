package main

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/fjordmq/fjord/internal/metadata"
	"github.com/fjordmq/fjord/internal/node"
)

// Flag values whose errors say what is allowed. pflag's own types answer
// a bad value with strconv's message ("parsing "x": invalid syntax");
// these answer "allowed: ...", and the same message serves the command
// line, the environment and the config file.

// intFlag is an integer flag limited to [min, max].
type intFlag[T int16 | int32 | int64] struct {
	p        *T
	min, max T
	note     string // appended to the allowed range, e.g. "(0: no limit)"
}

func newIntFlag[T int16 | int32 | int64](p *T, def, min, max T, note string) *intFlag[T] {
	*p = def
	return &intFlag[T]{p: p, min: min, max: max, note: note}
}

func (f *intFlag[T]) String() string { return strconv.FormatInt(int64(*f.p), 10) }
func (f *intFlag[T]) Type() string   { return "int" }

func (f *intFlag[T]) Set(s string) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || v < int64(f.min) || v > int64(f.max) {
		msg := fmt.Sprintf("allowed: an integer from %d to %d", f.min, f.max)
		if f.note != "" {
			msg += " " + f.note
		}
		return errors.New(msg)
	}
	*f.p = T(v)
	return nil
}

// enumFlag is a string flag with a fixed set of values.
type enumFlag struct {
	p       *string
	allowed []string
}

func newEnumFlag(p *string, def string, allowed ...string) *enumFlag {
	*p = def
	return &enumFlag{p: p, allowed: allowed}
}

func (f *enumFlag) String() string { return *f.p }
func (f *enumFlag) Type() string   { return "string" }

func (f *enumFlag) Set(s string) error {
	s = strings.TrimSpace(s)
	if !slices.Contains(f.allowed, s) {
		return fmt.Errorf("allowed: %s", strings.Join(f.allowed, ", "))
	}
	*f.p = s
	return nil
}

// freeSpaceFlag is a free-space threshold (--log-dir-free-space-warn,
// --log-dir-free-space-refuse): bytes with an optional unit, or a
// percentage of the file system (metadata.ParseFreeSpace).
type freeSpaceFlag struct{ p *string }

func newFreeSpaceFlag(p *string, def string) *freeSpaceFlag {
	*p = def
	return &freeSpaceFlag{p: p}
}

func (f *freeSpaceFlag) String() string { return *f.p }
func (f *freeSpaceFlag) Type() string   { return "size|percent" }

func (f *freeSpaceFlag) Set(s string) error {
	if _, err := metadata.ParseFreeSpace(s); err != nil {
		return err
	}
	*f.p = strings.TrimSpace(s)
	return nil
}

// processRolesFlag is --process-roles (Kafka's process.roles): broker
// and controller, or broker alone, in either order. A controller-only
// node is refused: every Fjord voter is also a broker.
type processRolesFlag struct{ brokerOnly *bool }

func (f *processRolesFlag) String() string {
	if *f.brokerOnly {
		return "broker"
	}
	return "broker,controller"
}
func (f *processRolesFlag) Type() string { return "roles" }

func (f *processRolesFlag) Set(s string) error {
	roles := map[string]bool{}
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		switch {
		case r != "broker" && r != "controller":
			return fmt.Errorf("unknown role %q (allowed: broker, controller, comma-separated)", r)
		case roles[r]:
			return fmt.Errorf("role %q given twice", r)
		}
		roles[r] = true
	}
	if !roles["broker"] {
		return errors.New("a controller-only node is not supported: every controller is also a broker (use broker,controller, or broker for a node that does not vote)")
	}
	*f.brokerOnly = !roles["controller"]
	return nil
}

// votersFlag is --controller-quorum-voters, read by node.ParseVoters,
// whose errors name the bad entry and what is allowed.
type votersFlag struct{ p *[]node.Voter }

func (f *votersFlag) String() string { return node.FormatVoters(*f.p) }
func (f *votersFlag) Type() string   { return "id@host:port,..." }

func (f *votersFlag) Set(s string) error {
	v, err := node.ParseVoters(s)
	if err != nil {
		return err
	}
	*f.p = v
	return nil
}

// boolFlag is a bool flag ("--x" alone means true).
type boolFlag struct{ p *bool }

func (f *boolFlag) String() string   { return strconv.FormatBool(*f.p) }
func (f *boolFlag) Type() string     { return "bool" }
func (f *boolFlag) IsBoolFlag() bool { return true }

func (f *boolFlag) Set(s string) error {
	v, err := strconv.ParseBool(strings.TrimSpace(s))
	if err != nil {
		return errors.New("allowed: true or false")
	}
	*f.p = v
	return nil
}

func addBoolFlag(fs *pflag.FlagSet, p *bool, name string, def bool, usage string) {
	*p = def
	fs.Var(&boolFlag{p}, name, usage)
	fs.Lookup(name).NoOptDefVal = "true"
}

// envName is the environment variable that sets a flag: FJORD_ and the
// flag's name in upper case with dashes as underscores.
func envName(flag string) string {
	return "FJORD_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applySources sets every flag not given on the command line from, in
// order of precedence, its environment variable and the config file
// (values already parsed by readConfigFile, nil without one). Only the
// flags named in only (all if nil) are read from the environment.
func applySources(cmd *cobra.Command, file map[string]string, fileName string, only ...string) error {
	var firstErr error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if firstErr != nil || f.Changed || (only != nil && !slices.Contains(only, f.Name)) {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if err := f.Value.Set(v); err != nil {
				firstErr = fmt.Errorf("%s=%s: %v", envName(f.Name), quoteValue(v), err)
			}
			f.Changed = true
			return
		}
		if v, ok := file[f.Name]; ok {
			if err := f.Value.Set(v); err != nil {
				firstErr = fmt.Errorf("config file %s: %s %s: %v", fileName, f.Name, quoteValue(v), err)
			}
			f.Changed = true
		}
	})
	return firstErr
}

// maxQuotedValue is how much of a refused value an error message quotes:
// the message names what was refused, it does not echo a hostile or
// mistaken value (a file's content in a variable) whole.
const maxQuotedValue = 128

// quoteValue quotes v, cut to its first maxQuotedValue bytes.
func quoteValue(v string) string {
	if len(v) <= maxQuotedValue {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(v[:maxQuotedValue]), len(v))
}

// flagError is the commands' FlagErrorFunc: pflag's message for a bad
// value with the value cut as quoteValue cuts it.
func flagError(_ *cobra.Command, err error) error {
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) && len(bad.GetValue()) > maxQuotedValue {
		return fmt.Errorf("invalid argument %s for \"--%s\" flag: %v", quoteValue(bad.GetValue()), bad.GetFlag().Name, bad.Unwrap())
	}
	return err
}

// readConfigFile reads a YAML file whose keys are the command's flag
// names (except "config" itself) and whose values are scalars, e.g.
//
//	kafka-addr: 127.0.0.1:9092
//	auto-create-topics: false
//
// An unknown key, a list or map value, or YAML that does not parse is an
// error naming the file and the key.
func readConfigFile(cmd *cobra.Command, path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config file %s is not valid YAML: %v", path, err)
	}
	values := map[string]string{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return values, nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config file %s: want a map of flag names to values (e.g. \"kafka-addr: 127.0.0.1:9092\"), line %d", path, root.Line)
	}
	var known []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name != "config" && f.Name != "help" {
			known = append(known, f.Name)
		}
	})
	sort.Strings(known)
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode || !slices.Contains(known, k.Value) {
			return nil, fmt.Errorf("config file %s: unknown key %q on line %d (allowed: %s)",
				path, k.Value, k.Line, strings.Join(known, ", "))
		}
		if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
			return nil, fmt.Errorf("config file %s: key %q on line %d: want a single value, not a list, a map or nothing",
				path, k.Value, k.Line)
		}
		values[k.Value] = v.Value
	}
	return values, nil
}

// givenFlags returns "--name" for each of names given on the command
// line, leaving out a bool given as false: --from-beginning=false is no
// choice at all.
func givenFlags(cmd *cobra.Command, names ...string) []string {
	var given []string
	for _, name := range names {
		if f := cmd.Flags().Lookup(name); f.Changed && f.Value.String() != "false" {
			given = append(given, "--"+name)
		}
	}
	return given
}
