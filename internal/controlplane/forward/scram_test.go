package forward

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
)

// AlterScramCredentials goes to the controller as Kafka's
// AlterUserScramCredentials with every field as given (the salted
// password, never a password); each user's refusal comes back as its
// own error, in the controller's order, and the change is waited for at
// the answer's tagged offset only when a user went in. The wait pins the
// lesson of forward/quotas.go: a response type missing from
// responseTags never carries the offset, and a forwarded change that
// succeeded would answer REQUEST_TIMED_OUT.
func TestAlterScramCredentialsForwarded(t *testing.T) {
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
		resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		for _, d := range r.Deletions {
			out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			out.User, out.ErrorCode, out.ErrorMessage = d.Name, kerr.ResourceNotFound.Code, kmsg.StringPtr("attempt to delete a user credential that does not exist")
			resp.Results = append(resp.Results, out)
		}
		for _, u := range r.Upsertions {
			out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			out.User = u.Name
			resp.Results = append(resp.Results, out)
		}
		return resp
	})
	c, images, _ := newForwarder(t, f)
	up := controlplane.ScramUpsertion{User: "alice", Mechanism: 2, Iterations: 8192, Salt: []byte("salt"), SaltedPassword: bytes.Repeat([]byte{7}, 64)}
	results, err := c.AlterScramCredentials(t.Context(), []controlplane.ScramUpsertion{up}, []controlplane.ScramDeletion{{User: "bob", Mechanism: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].User != "bob" || !errors.Is(results[0].Err, kerr.ResourceNotFound) ||
		!strings.Contains(results[0].Err.Error(), "does not exist") || results[1].User != "alice" || results[1].Err != nil {
		t.Fatalf("results %+v, want bob RESOURCE_NOT_FOUND with the controller's message, then alice", results)
	}
	if got := images.waitedFor(); !slices.Equal(got, []uint64{taggedOffset}) {
		t.Fatalf("waited for %v, want the tagged offset", got)
	}
	r := f.requests()[0].(*kmsg.AlterUserSCRAMCredentialsRequest)
	if len(r.Upsertions) != 1 || len(r.Deletions) != 1 {
		t.Fatalf("sent %+v", r)
	}
	u, d := r.Upsertions[0], r.Deletions[0]
	if u.Name != "alice" || u.Mechanism != 2 || u.Iterations != 8192 || string(u.Salt) != "salt" || !bytes.Equal(u.SaltedPassword, up.SaltedPassword) ||
		d.Name != "bob" || d.Mechanism != 1 {
		t.Fatalf("sent upsertion %+v and deletion %+v", u, d)
	}

	// Every user refused: nothing to wait for.
	results, err = c.AlterScramCredentials(t.Context(), nil, []controlplane.ScramDeletion{{User: "bob", Mechanism: 1}})
	if err != nil || len(results) != 1 || results[0].Err == nil || len(images.waitedFor()) != 1 {
		t.Fatalf("a refused change: %v %+v, waited %v", err, results, images.waitedFor())
	}
}

// A controller that answers with users it was not asked about, or
// without some it was, is not trusted: the call is REQUEST_TIMED_OUT
// (the change may be in), and not retried.
func TestAlterScramCredentialsForwardedBadAnswer(t *testing.T) {
	for name, users := range map[string][]string{"a stranger": {"alice", "mallory"}, "one missing": nil} {
		t.Run(name, func(t *testing.T) {
			f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
				resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
				for _, u := range users {
					out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
					out.User = u
					resp.Results = append(resp.Results, out)
				}
				return resp
			})
			c, _, _ := newForwarder(t, f)
			_, err := c.AlterScramCredentials(t.Context(), nil, []controlplane.ScramDeletion{{User: "alice", Mechanism: 1}})
			if !errors.Is(err, controlplane.ErrTimedOut) || len(f.requests()) != 1 {
				t.Fatalf("%v after %d requests, want REQUEST_TIMED_OUT after 1", err, len(f.requests()))
			}
		})
	}
}

// A controller that moved answers every user NOT_CONTROLLER (Kafka's
// response has no top-level error): that is the request's, and it is
// sent again to find the controller.
func TestAlterScramCredentialsForwardRetries(t *testing.T) {
	var mu sync.Mutex
	n := 0
	f := newFakeController(t, func(req kmsg.Request) kmsg.Response {
		r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
		resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		for _, u := range r.Upsertions {
			out := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			out.User = u.Name
			if first {
				out.ErrorCode, out.ErrorMessage = kerr.NotController.Code, kmsg.StringPtr("moved")
			}
			resp.Results = append(resp.Results, out)
		}
		return resp
	})
	c, images, _ := newForwarder(t, f)
	up := controlplane.ScramUpsertion{User: "alice", Mechanism: 1, Iterations: 4096, Salt: []byte("s"), SaltedPassword: make([]byte, 32)}
	results, err := c.AlterScramCredentials(t.Context(), []controlplane.ScramUpsertion{up}, nil)
	if err != nil || len(results) != 1 || results[0].Err != nil {
		t.Fatalf("%v %+v, want alice altered", err, results)
	}
	if got := len(f.requests()); got != 2 {
		t.Errorf("%d requests, want 2 (one NOT_CONTROLLER, one answered)", got)
	}
	if w := images.waitedFor(); !slices.Equal(w, []uint64{taggedOffset}) {
		t.Errorf("waited for %v, want the tagged offset", w)
	}
}
