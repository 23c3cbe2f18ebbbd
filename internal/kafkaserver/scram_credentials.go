package kafkaserver

// DescribeUserScramCredentials: v0; AlterUserScramCredentials: v0
// (KIP-554).
//
// The credentials live in the metadata log (metadata.ScramCredentialRecord),
// so Describe answers from this node's image and Alter goes to the active
// controller. Describe says which mechanisms a user has credentials for
// and their iterations, never a salt or a key; a user named without
// credentials is RESOURCE_NOT_FOUND, a user named twice
// DUPLICATE_RESOURCE, and no names is every user. Alter answers each user
// once, as Kafka's controller does (controlplane.ScramCredentials):
// the rules that need no image (user name, mechanism, iterations, salt,
// salted password length: controlplane.CheckScramUpsertion) are checked
// here, in Kafka's order, so a user refused by them is answered here and
// its entries never leave the node; the controller checks the rest
// (a deletion's credential exists, a user named twice) and commits.
//
// Hostile input is bounded before any work: an Alter of more than
// maxScramAlterations entries is refused whole, a Describe naming more
// than maxScramDescribeUsers users too, and a name, salt or salted
// password longer than metadata's bounds is refused for its user alone.
// A response is never much larger than its request: each user is
// answered once, its name echoed only in the result's user field, never
// in a message.
//
// Authorization, before anything else: DESCRIBE on the cluster for
// Describe (denied: the top-level CLUSTER_AUTHORIZATION_FAILED and, as
// Kafka's error response, one result per user named carrying it), ALTER
// on the cluster for Alter (denied: each user named answered
// CLUSTER_AUTHORIZATION_FAILED once, nothing sent to the controller).

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/acl"
	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

// maxScramAlterations bounds one AlterUserScramCredentials (deletions and
// upsertions together); a larger request is refused whole, each user
// INVALID_REQUEST. A request is one metadata batch.
const maxScramAlterations = 1000

// maxScramDescribeUsers bounds the users one DescribeUserScramCredentials
// names; a larger request is refused with a top-level INVALID_REQUEST.
// Describing every user (no names) is not bounded by it:
// metadata.MaxScramUsers bounds that.
const maxScramDescribeUsers = 10_000

// scramAlteration is one user of an AlterUserScramCredentials, in the
// order first named.
type scramAlteration struct {
	user string
	// entries counts the user's entries; err is its refusal here, nil
	// while it may go to the controller.
	entries int
	err     error
}

func handleAlterUserSCRAMCredentials(ctx context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrAlterUserSCRAMCredentialsResponse()
	resp.SetVersion(req.version)
	var order []*scramAlteration
	users := map[string]*scramAlteration{}
	// note records one entry of user and its refusal here, if any, with
	// Kafka's rule for a user named more than once: the first refusal
	// stands; a refusal of a later entry refuses the user as named twice
	// (Kafka finds the duplicate before it looks at the entry).
	note := func(user string, err error) {
		a := users[user]
		if a == nil {
			a = &scramAlteration{user: user}
			users[user] = a
			order = append(order, a)
		}
		if a.err != nil {
			return
		}
		a.entries++
		switch {
		case err != nil && a.entries == 1:
			a.err = err
		case err != nil:
			a.err = fmt.Errorf("%w: a user credential cannot be altered twice in the same request", kerr.DuplicateResource)
		}
	}
	answer := func() (kmsg.Response, func(), error) {
		for _, a := range order {
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User = a.user
			res.ErrorCode, res.ErrorMessage = s.errorAndMessage(a.err, "AlterUserScramCredentials")
			resp.Results = append(resp.Results, res)
		}
		return resp, nil, nil
	}

	// refuseAll answers every user named with err, each once.
	refuseAll := func(err error) (kmsg.Response, func(), error) {
		for _, d := range r.Deletions {
			note(d.Name, err)
		}
		for _, u := range r.Upsertions {
			note(u.Name, err)
		}
		return answer()
	}

	if err := s.clusterDenied(req, acl.OperationAlter); err != nil {
		return refuseAll(err)
	}
	if n := len(r.Deletions) + len(r.Upsertions); n > maxScramAlterations {
		return refuseAll(fmt.Errorf("%w: %d alterations in one request (at most %d)", kerr.InvalidRequest, n, maxScramAlterations))
	}
	dels := make([]controlplane.ScramDeletion, len(r.Deletions))
	for i, d := range r.Deletions {
		dels[i] = controlplane.ScramDeletion{User: d.Name, Mechanism: d.Mechanism}
		_, err := controlplane.CheckScramDeletion(dels[i])
		note(d.Name, err)
	}
	ups := make([]controlplane.ScramUpsertion, len(r.Upsertions))
	for i, u := range r.Upsertions {
		ups[i] = controlplane.ScramUpsertion{User: u.Name, Mechanism: u.Mechanism, Iterations: u.Iterations, Salt: u.Salt, SaltedPassword: u.SaltedPassword}
		_, err := controlplane.CheckScramUpsertion(ups[i])
		note(u.Name, err)
	}

	// Every entry of the users not refused goes to the controller, which
	// finds the users named twice (DUPLICATE_RESOURCE, or the first
	// entry's own refusal) as Kafka's does.
	ask := func(user string) bool { return users[user].err == nil }
	dels = slices.DeleteFunc(dels, func(d controlplane.ScramDeletion) bool { return !ask(d.User) })
	ups = slices.DeleteFunc(ups, func(u controlplane.ScramUpsertion) bool { return !ask(u.User) })
	if len(dels) == 0 && len(ups) == 0 {
		return answer()
	}
	results, err := s.controller.AlterScramCredentials(ctx, ups, dels)
	answered := map[string]error{}
	for _, res := range results {
		answered[res.User] = res.Err
	}
	for _, a := range order {
		if a.err != nil {
			continue
		}
		switch got, ok := answered[a.user]; {
		case err != nil:
			a.err = err
		case ok:
			a.err = got
		default:
			// The controller answers every user it is asked about
			// (forward checks a remote one's answer); one left out is
			// a broken invariant there, not the client's doing.
			a.err = fmt.Errorf("kafkaserver: the controller did not answer for user %q", truncateForMessage(a.user))
		}
	}
	return answer()
}

func handleDescribeUserSCRAMCredentials(_ context.Context, s *Server, req *request) (kmsg.Response, func(), error) {
	r := req.body.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := kmsg.NewPtrDescribeUserSCRAMCredentialsResponse()
	resp.SetVersion(req.version)
	if err := s.clusterDenied(req, acl.OperationDescribe); err != nil {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(err, "DescribeUserScramCredentials")
		resp.Results = make([]kmsg.DescribeUserSCRAMCredentialsResponseResult, 0, len(r.Users))
		for _, u := range r.Users {
			res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
			res.User = u.Name
			res.ErrorCode, res.ErrorMessage = resp.ErrorCode, resp.ErrorMessage
			resp.Results = append(resp.Results, res)
		}
		return resp, nil, nil
	}
	if len(r.Users) > maxScramDescribeUsers {
		resp.ErrorCode, resp.ErrorMessage = s.errorAndMessage(fmt.Errorf("%w: %d users in one request (at most %d; name none to describe every user)",
			kerr.InvalidRequest, len(r.Users), maxScramDescribeUsers), "DescribeUserScramCredentials")
		return resp, nil, nil
	}
	img := s.image()
	var names []string
	duplicate := map[string]bool{}
	if len(r.Users) == 0 {
		names = slices.Sorted(maps.Keys(img.ScramCredentials))
	}
	for _, u := range r.Users {
		if _, seen := duplicate[u.Name]; seen {
			duplicate[u.Name] = true
			continue
		}
		duplicate[u.Name] = false
		names = append(names, u.Name)
	}
	resp.Results = make([]kmsg.DescribeUserSCRAMCredentialsResponseResult, 0, len(names))
	for _, name := range names {
		res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		res.User = name
		var err error
		switch creds := img.ScramCredentials[name]; {
		case duplicate[name]:
			err = fmt.Errorf("%w: cannot describe SCRAM credentials for the same user twice in a single request", kerr.DuplicateResource)
		case len(creds) == 0:
			err = fmt.Errorf("%w: attempt to describe a user credential that does not exist", kerr.ResourceNotFound)
		default:
			// Mechanism and iterations only: never the salt or the
			// keys. In Kafka's mechanism order (its type numbers).
			for _, m := range []string{metadata.ScramSHA256, metadata.ScramSHA512} {
				if c, ok := creds[m]; ok {
					info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					info.Mechanism, info.Iterations = metadata.ScramMechanismType(m), c.Iterations
					res.CredentialInfos = append(res.CredentialInfos, info)
				}
			}
		}
		res.ErrorCode, res.ErrorMessage = s.errorAndMessage(err, "DescribeUserScramCredentials")
		resp.Results = append(resp.Results, res)
	}
	return resp, nil, nil
}
