package forward

import (
	"context"

	"github.com/fjordmq/fjord/internal/fjordmsg"
	"github.com/fjordmq/fjord/internal/metadata"
)

// MarkTopicKeyed implements controlplane.Client with Fjord's own
// request (fjordmsg.MarkTopicKeyedRequest): no Kafka API marks a topic.
// Its answer carries the metadata offset in its body (Fjord's requests
// have no tagged fields), which this node then waits for, as for the
// Kafka APIs' MetadataOffsetTag.
func (c *Client) MarkTopicKeyed(ctx context.Context, id metadata.UUID) error {
	return c.do(ctx, func(ctx context.Context) error {
		return c.cfg.Local.MarkTopicKeyed(ctx, id)
	}, func(ctx context.Context) error {
		resp, _, err := c.send(ctx, &fjordmsg.MarkTopicKeyedRequest{TopicID: id})
		if err != nil {
			return err
		}
		r := resp.(*fjordmsg.MarkTopicKeyedResponse)
		if err := codeError(r.ErrorCode, r.ErrorMessage); err != nil {
			return err
		}
		return c.await(ctx, uint64(max(r.MetadataOffset, 0)))
	})
}
