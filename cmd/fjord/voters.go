package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cluster add-voter, remove-voter: KIP-853's AddRaftVoter and
// RemoveRaftVoter, sent to the active controller (Fjord does not
// forward them: only the controller changes the quorum).

func newVoterCommands(o *clientOptions) []*cobra.Command {
	var nodeID int32
	var controllerAddr string
	add := &cobra.Command{
		Use:   "add-voter",
		Short: "Make a broker-only node a voter of the controller quorum",
		Long: `Make a broker-only node a voter of the controller quorum (KIP-853's
AddRaftVoter). The node must already follow the metadata log: start it
with fjord serve --process-roles broker and the quorum's voter list, then
add it. To replace a voter whose disk was lost: remove-voter it, start it
again broker-only on an empty data directory, add-voter it, and from then
on start it with the voter list naming it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			if !cmd.Flags().Changed("node-id") {
				return errors.New("name the node: --node-id N")
			}
			req := kmsg.NewPtrAddRaftVoterRequest()
			req.VoterID = nodeID
			req.TimeoutMillis = int32(requestTimeout.Milliseconds())
			if controllerAddr != "" {
				host, port, err := net.SplitHostPort(controllerAddr)
				p, perr := strconv.ParseUint(port, 10, 16)
				if err != nil || host == "" || perr != nil || p == 0 {
					return fmt.Errorf("--controller-addr %q: want host:port, the address the node follows the metadata log from", controllerAddr)
				}
				req.Listeners = []kmsg.AddRaftVoterRequestListener{{Name: "CONTROLLER", Host: host, Port: uint16(p)}}
			}
			return changeQuorum(cmd, o, req, fmt.Sprintf("node %d is a voter", nodeID))
		},
	}
	add.Flags().Var(newIntFlag(&nodeID, -1, 0, math.MaxInt32, ""), "node-id", "the node to make a voter")
	add.Flags().StringVar(&controllerAddr, "controller-addr", "", "the node's controller address, checked against the one it follows the log from (default: not checked)")

	var removeID int32
	remove := &cobra.Command{
		Use:   "remove-voter",
		Short: "Take a voter out of the controller quorum",
		Long: `Take a voter out of the controller quorum (KIP-853's RemoveRaftVoter).
The quorum must keep a majority of its remaining voters running. The
removed node no longer votes or receives the metadata log.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.applyEnv(cmd); err != nil {
				return err
			}
			if !cmd.Flags().Changed("node-id") {
				return errors.New("name the voter: --node-id N")
			}
			req := kmsg.NewPtrRemoveRaftVoterRequest()
			req.VoterID = removeID
			return changeQuorum(cmd, o, req, fmt.Sprintf("node %d is no longer a voter", removeID))
		},
	}
	remove.Flags().Var(newIntFlag(&removeID, -1, 0, math.MaxInt32, ""), "node-id", "the voter to remove")
	return []*cobra.Command{add, remove}
}

// changeQuorum sends req to the active controller, asking Metadata for
// it again while the controller moves (NOT_CONTROLLER), and prints done
// once it answers without an error.
func changeQuorum(cmd *cobra.Command, o *clientOptions, req kmsg.Request, done string) error {
	ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
	defer cancel()
	cl, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := toController(ctx, cl, req); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), done)
	return nil
}

// toController sends req to the active controller, asking Metadata for
// it again while the controller moves (NOT_CONTROLLER).
func toController(ctx context.Context, cl *kgo.Client, req kmsg.Request) error {
	for {
		err := sendQuorumChange(ctx, cl, req)
		if err == nil {
			return nil
		}
		if !errors.Is(err, kerr.NotController) || ctx.Err() != nil {
			return fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
		}
	}
}

func sendQuorumChange(ctx context.Context, cl *kgo.Client, req kmsg.Request) error {
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{}
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	if mresp.ControllerID < 0 {
		return fmt.Errorf("%w: no active controller known", kerr.NotController)
	}
	resp, err := cl.Broker(int(mresp.ControllerID)).Request(ctx, req)
	if err != nil {
		return err
	}
	var code int16
	var msg *string
	switch r := resp.(type) {
	case *kmsg.AddRaftVoterResponse:
		code, msg = r.ErrorCode, r.ErrorMessage
	case *kmsg.RemoveRaftVoterResponse:
		code, msg = r.ErrorCode, r.ErrorMessage
	case *kmsg.UnregisterBrokerResponse:
		code, msg = r.ErrorCode, r.ErrorMessage
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if msg != nil && *msg != "" {
			return fmt.Errorf("%w: %s", err, *msg)
		}
		return err
	}
	return nil
}
