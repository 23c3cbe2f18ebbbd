package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
)

// fjord user: SCRAM users over KIP-554's AlterUserScramCredentials and
// DescribeUserScramCredentials; kafka-configs.sh --alter --add-config
// 'SCRAM-SHA-512=[iterations=4096,password=...]' --entity-type users is
// the model, except that the password is never an argument: a command
// line is visible to every user of the machine (ps, /proc), so it comes
// from a file or from stdin.
//
// The password is salted here (kadm: a random 24-byte salt and PBKDF2
// over the mechanism's hash); only the salt and the salted password go
// to the node, which keeps the keys SCRAM derives from them, never the
// password. Every argument is checked with the node's own rules
// (metadata.ValidateScramUser, ValidateScramIterations) before anything
// is sent.

// maxPasswordBytes bounds a password read from stdin or a file: far
// beyond any real one, it keeps a wrong file (a log, a binary) from being
// read whole and salted.
const maxPasswordBytes = 4096

func newUserCommand() *cobra.Command {
	var o clientOptions
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Create, delete and list SCRAM users (SASL/SCRAM credentials)",
		Long: `SCRAM users (Kafka's, KIP-554): the credentials SASL/SCRAM-SHA-256,
SCRAM-SHA-512 and PLAIN log in with, kept in the metadata log so every node
authenticates the same users. A user has a credential per mechanism; each
holds a salt, an iteration count and two keys derived from the password,
never the password itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	o.addFlags(cmd)
	cmd.AddCommand(
		newUserCreateCommand(&o),
		newUserDeleteCommand(&o),
		newUserListCommand(&o),
	)
	return cmd
}

func newUserCreateCommand(o *clientOptions) *cobra.Command {
	var (
		mechanism    string
		iterations   int32
		passwordFile string
		password     string
	)
	cmd := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a SCRAM user's credential, or give it a new password",
		Long: `Create user NAME's credential for one mechanism (--mechanism), or replace
it: the user's new password (kafka-configs.sh --alter --add-config).
A user may have one credential per mechanism; run create once for each.

The password is the first line of --password-file, or else one line read
from stdin, without its line end (a trailing \r too). Never give it as an
argument: other users of the machine can read a command line.

  fjord user create alice --password-file alice.pw
  printf '%s\n' "$PASSWORD" | fjord user create alice --mechanism SCRAM-SHA-256`,
		Args: cobra.ExactArgs(1),
		// Bad input fails before the command connects.
		PreRunE: func(cmd *cobra.Command, args []string) error {
			if err := checkUserName(args[0]); err != nil {
				return err
			}
			var err error
			if passwordFile != "" {
				password, err = readPasswordFile(passwordFile)
			} else {
				password, err = readPasswordStdin(cmd, args[0])
			}
			return err
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error {
			user := args[0]
			had, err := userCredentials(ctx, adm, user)
			if err != nil {
				return err
			}
			m := kadmMechanism(mechanism)
			res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: m, Iterations: iterations, Password: password}})
			if err == nil {
				err = scramAlteredErr(res, user)
			}
			if err != nil {
				return fmt.Errorf("setting the %s credential of user %s: %w", mechanism, userText(user), err)
			}
			verb := "created"
			if slices.ContainsFunc(had, func(c kadm.CredInfo) bool { return c.Mechanism == m }) {
				verb = "replaced"
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s the %s credential of user %s (%d iterations)\n", verb, mechanism, userText(user), iterations)
			return err
		}),
	}
	f := cmd.Flags()
	f.Var(newEnumFlag(&mechanism, metadata.ScramSHA512, metadata.ScramSHA512, metadata.ScramSHA256), "mechanism",
		"SCRAM mechanism of the credential: SCRAM-SHA-512 or SCRAM-SHA-256")
	f.Var(newIntFlag(&iterations, metadata.MinScramIterations, metadata.MinScramIterations, metadata.MaxScramIterations, ""), "iterations",
		"PBKDF2 iterations of the salted password (Kafka's bounds; more costs every login more)")
	f.StringVar(&passwordFile, "password-file", "", "file whose first line is the password (default: one line from stdin)")
	return cmd
}

func newUserDeleteCommand(o *clientOptions) *cobra.Command {
	var mechanism string
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a SCRAM user's credentials: every mechanism's, or one",
		Long: `Delete user NAME's credential for --mechanism, or without it every
credential the user has (kafka-configs.sh --alter --delete-config). A user
left with none can no longer log in with SCRAM or PLAIN; connections it
has open stay open until they re-authenticate or close.

A credential the user does not have is refused, as the node refuses it:
a mistyped name must not pass for done.`,
		Args: cobra.ExactArgs(1),
		PreRunE: func(_ *cobra.Command, args []string) error {
			return checkUserName(args[0])
		},
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, args []string) error {
			user := args[0]
			mechanisms := []kadm.ScramMechanism{kadmMechanism(mechanism)}
			if mechanism == "" {
				had, err := userCredentials(ctx, adm, user)
				if err != nil {
					return err
				}
				if len(had) == 0 {
					return fmt.Errorf("user %s has no SCRAM credentials; nothing deleted", userText(user))
				}
				mechanisms = mechanisms[:0]
				for _, c := range had {
					mechanisms = append(mechanisms, c.Mechanism)
				}
			}
			// One request per mechanism: Kafka's controller refuses a
			// user named twice in one request (DUPLICATE_RESOURCE).
			var deleted []string
			for _, m := range mechanisms {
				res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: m}}, nil)
				if err == nil {
					err = scramAlteredErr(res, user)
				}
				if err != nil {
					return fmt.Errorf("deleting the %s credential of user %s: %w", m, userText(user), err)
				}
				deleted = append(deleted, m.String())
			}
			noun := "credential"
			if len(deleted) > 1 {
				noun += "s"
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "deleted the %s %s of user %s\n", strings.Join(deleted, " and "), noun, userText(user))
			return err
		}),
	}
	cmd.Flags().Var(newEnumFlag(&mechanism, "", metadata.ScramSHA512, metadata.ScramSHA256), "mechanism",
		"delete only this mechanism's credential: SCRAM-SHA-512 or SCRAM-SHA-256 (default: every one)")
	return cmd
}

func newUserListCommand(o *clientOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the SCRAM users, their mechanisms and iterations",
		Long: `List every SCRAM user: one row per user and mechanism, with the
credential's iterations (never its salt or keys, which the node does not
tell).

-o json is one document:

  {"users": [{"user": "alice",
              "credentials": [{"mechanism": "SCRAM-SHA-512", "iterations": 4096}]}]}

Users are sorted by name, each one's credentials SCRAM-SHA-256 first;
"users" is [] when there is none.`,
		Args: cobra.NoArgs,
		RunE: adminRun(o, func(ctx context.Context, cmd *cobra.Command, adm *kadm.Client, _ []string) error {
			described, err := adm.DescribeUserSCRAMs(ctx)
			if err != nil {
				return fmt.Errorf("listing SCRAM users: %w", err)
			}
			r := userReport{Users: []userEntry{}}
			for _, d := range described.Sorted() {
				if d.Err != nil {
					return fmt.Errorf("listing SCRAM users: user %s: %w", userText(d.User), kafkaError(d.Err, d.ErrMessage))
				}
				e := userEntry{User: d.User, Credentials: []userCredential{}}
				for _, c := range sortedCredInfos(d.CredInfos) {
					e.Credentials = append(e.Credentials, userCredential{Mechanism: c.Mechanism.String(), Iterations: c.Iterations})
				}
				r.Users = append(r.Users, e)
			}
			return printResult(cmd, output, r)
		}),
	}
	addOutputFlag(cmd, &output)
	return cmd
}

// checkUserName applies the node's rule for a user name.
func checkUserName(user string) error {
	if err := metadata.ValidateScramUser(user); err != nil {
		// The name is an argument: say what is wrong with it, not the
		// Kafka code the node would answer.
		msg := strings.TrimPrefix(err.Error(), metadata.ErrUnacceptableCredential.Error()+": ")
		return fmt.Errorf("user name %s: %s", quoteValue(user), msg)
	}
	return nil
}

// readPasswordFile reads the password from path: its first line (the
// rule of --sasl-password-file).
func readPasswordFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	defer f.Close()
	p, err := readPasswordLine(f)
	if err != nil {
		return "", fmt.Errorf("--password-file %s: %w", path, err)
	}
	return p, nil
}

// readPasswordStdin reads the password as one line from stdin, saying
// what it waits for when stdin is a terminal (the line is echoed: pipe
// it, or use --password-file, to keep it off the screen).
func readPasswordStdin(cmd *cobra.Command, user string) (string, error) {
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			fmt.Fprintf(cmd.ErrOrStderr(), "Password for user %s (one line; it is echoed): ", userText(user))
		}
	}
	p, err := readPasswordLine(in)
	if err != nil {
		return "", fmt.Errorf("password from stdin: %w (give it as one line, or use --password-file)", err)
	}
	return p, nil
}

// readPasswordLine reads one line from r, without its line end ("\n",
// and a "\r" before it): the password. It reads no further than the line
// (a terminal's user is not made to type ^D) and no more than
// maxPasswordBytes.
func readPasswordLine(r io.Reader) (string, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxPasswordBytes+2), maxPasswordBytes+2)
	line, err := br.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	switch {
	case line == "":
		return "", errors.New("the password is empty")
	case len(line) > maxPasswordBytes:
		return "", fmt.Errorf("the password is longer than %d bytes", maxPasswordBytes)
	}
	return line, nil
}

// kadmMechanism is mechanism's number ("" is 0, unknown).
func kadmMechanism(mechanism string) kadm.ScramMechanism {
	return kadm.ScramMechanism(metadata.ScramMechanismType(mechanism))
}

// userCredentials is what user has: none when the node says the user
// has no credentials.
func userCredentials(ctx context.Context, adm *kadm.Client, user string) ([]kadm.CredInfo, error) {
	described, err := adm.DescribeUserSCRAMs(ctx, user)
	if err != nil {
		return nil, fmt.Errorf("describing user %s: %w", userText(user), err)
	}
	d, ok := described[user]
	switch {
	case !ok:
		return nil, fmt.Errorf("describing user %s: the node did not answer for the user", userText(user))
	case errors.Is(d.Err, kerr.ResourceNotFound):
		return nil, nil
	case d.Err != nil:
		return nil, fmt.Errorf("describing user %s: %w", userText(user), kafkaError(d.Err, d.ErrMessage))
	}
	return sortedCredInfos(d.CredInfos), nil
}

// scramAlteredErr is the node's answer for user: its refusal in its own
// words (kafkaError), or nil.
func scramAlteredErr(res kadm.AlteredUserSCRAMs, user string) error {
	r, ok := res[user]
	switch {
	case !ok || len(res) != 1:
		return fmt.Errorf("the node answered %d users, not the one asked about", len(res))
	case r.Err != nil:
		return kafkaError(r.Err, r.ErrMessage)
	}
	return nil
}

func sortedCredInfos(infos []kadm.CredInfo) []kadm.CredInfo {
	return slices.SortedFunc(slices.Values(infos), func(a, b kadm.CredInfo) int { return int(a.Mechanism) - int(b.Mechanism) })
}

// userText is user as output and messages show it: quoted when it could
// be misread (spaces, commas, something unprintable), as quota entities
// are.
func userText(user string) string {
	if needsQuoting(user) {
		return quoteValue(user)
	}
	return user
}

// userReport is user list -o json.
type userReport struct {
	Users []userEntry `json:"users"`
}

type userEntry struct {
	User        string           `json:"user"`
	Credentials []userCredential `json:"credentials"`
}

type userCredential struct {
	Mechanism  string `json:"mechanism"`
	Iterations int32  `json:"iterations"`
}

func (r userReport) printText(out io.Writer) error {
	if len(r.Users) == 0 {
		_, err := fmt.Fprintln(out, "No SCRAM users.")
		return err
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "USER\tMECHANISM\tITERATIONS")
	for _, u := range r.Users {
		for _, c := range u.Credentials {
			fmt.Fprintf(w, "%s\t%s\t%d\n", userText(u.User), c.Mechanism, c.Iterations)
		}
	}
	return w.Flush()
}
