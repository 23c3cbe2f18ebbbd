package kafkaserver

// Client quotas at the protocol edge (issue 19; internal/quota keeps the
// rates). Each request of a client that a quota covers is charged after
// it is handled: a Produce its request bytes, a consumer's Fetch the
// record bytes it returns, and every request the time its handler spent
// working (not the long-poll or acks waits). A client over a quota gets
// throttle_time_ms in the response, and the connection is muted: the
// reader reads no further request from it until the throttle has passed
// (KIP-219's order: the response goes out at once, and a client that
// honours the throttle sends nothing meanwhile anyway). A response of a
// version from before KIP-219, whose client does not wait by itself, is
// held back for the throttle instead, as Kafka does.
//
// Fetch: a consumer that still owes a wait from an earlier throttle is
// answered at once with no records and the time left (Kafka's throttled
// fetch response), without reading the log; one within its quota has its
// fetch size capped at what the quota allows in a window (Kafka's
// getMaxValueInQuotaWindow), so one fetch cannot take many windows' worth.
//
// Fjord's own connections (followers' fetches, forwarded requests,
// coordinators) are never charged: they carry the cluster, not a client.

import (
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/quota"
)

// quotaClient is who req is, for quotas; ok is false for Fjord's own
// connections, which quotas never cover.
func (s *Server) quotaClient(req *request) (quota.Client, bool) {
	if s.quotas == nil {
		return quota.Client{}, false
	}
	if len(s.image().ClientQuotas) == 0 {
		return quota.Client{}, false
	}
	if s.internalClient(req) {
		return quota.Client{}, false
	}
	c := quota.Client{User: quota.Anonymous}
	if req.conn != nil {
		// Kafka's user entity is the principal's name: a client
		// certificate's subject, or (later) the SASL user.
		c.User = req.conn.Principal().Name
	}
	if req.clientID != nil {
		c.ClientID = *req.clientID
	}
	return c, true
}

// chargeQuota charges value to c's quota of kind, if one covers c, and
// returns the throttle owed.
func (s *Server) chargeQuota(c quota.Client, kind quota.Kind, value float64) time.Duration {
	img := s.image()
	limit, key, ok := quota.Resolve(img.ClientQuota, kind, c)
	if !ok {
		return 0
	}
	d := s.quotas.Record(key, limit, value)
	if d > 0 {
		s.metrics.throttled(kind)
	}
	return d
}

// requestPercentToNanos turns request_percentage (percent of one core)
// into the handler nanoseconds per second it allows.
func requestPercentToNanos(pct float64) float64 { return pct / 100 * float64(time.Second) }

// chargeAfterHandling charges a handled request to its client's quotas:
// its handler's working time (request_percentage) and, for a Produce,
// its bytes (producer_byte_rate); Fetch charges its own bytes. It sets
// the throttle in the response and mutes the connection.
func (c *conn) chargeAfterHandling(req *request, sl *slot, busy time.Duration) {
	qc, ok := c.s.quotaClient(req)
	if !ok {
		return
	}
	img := c.s.image()
	var d time.Duration
	if limit, key, found := quota.Resolve(img.ClientQuota, quota.RequestTime, qc); found {
		d = c.s.quotas.Record(key, requestPercentToNanos(limit), float64(busy))
		if d > 0 {
			c.s.metrics.throttled(quota.RequestTime)
		}
	}
	if req.key == produceKey {
		d = max(d, c.s.chargeQuota(qc, quota.ProduceBytes, float64(req.frameBytes)))
	}
	if req.throttle > d {
		d = req.throttle // the handler's own (a throttled fetch)
	}
	if d <= 0 {
		return
	}
	c.throttle(sl, d)
}

// throttle puts d in sl's response (the larger of it and what the
// handler set) and mutes the connection for d.
func (c *conn) throttle(sl *slot, d time.Duration) {
	ms := int32(min(d.Milliseconds()+1, math.MaxInt32))
	if tr, ok := sl.resp.(interface {
		Throttle() (int32, bool)
		SetThrottle(int32)
	}); ok {
		sl.resp.SetVersion(sl.version)
		cur, clientWaits := tr.Throttle()
		tr.SetThrottle(max(cur, ms))
		if !clientWaits {
			sl.delay = d
		}
	}
	c.mute(d)
}

// mute stops the reader for d from now (the later of this and any mute
// already set).
func (c *conn) mute(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	for {
		cur := c.mutedUntil.Load()
		if cur >= until || c.mutedUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

// waitUnmuted blocks the reader while the connection is muted; false
// when the connection closed meanwhile.
func (c *conn) waitUnmuted() bool {
	for {
		d := time.Until(time.Unix(0, c.mutedUntil.Load()))
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.closed:
			t.Stop()
			return false
		}
	}
}

// fetchQuota is a consumer fetch's quota: the client, its
// consumer_byte_rate's limit and rate, and whether one covers it.
type fetchQuota struct {
	client quota.Client
	limit  float64
	key    quota.SensorKey
	ok     bool
}

// fetchQuotaFor resolves a consumer's fetch quota (none for followers).
func (s *Server) fetchQuotaFor(req *request, replicaID int32) fetchQuota {
	if replicaID >= 0 {
		return fetchQuota{}
	}
	qc, ok := s.quotaClient(req)
	if !ok {
		return fetchQuota{}
	}
	limit, key, ok := quota.Resolve(s.image().ClientQuota, quota.FetchBytes, qc)
	return fetchQuota{client: qc, limit: limit, key: key, ok: ok}
}

// owed is the wait the consumer still owes from an earlier fetch.
func (f fetchQuota) owed(s *Server) time.Duration {
	if !f.ok {
		return 0
	}
	return s.quotas.Check(f.key, f.limit)
}

// capBytes caps a fetch's byte limit at what the quota allows in one
// window.
func (f fetchQuota) capBytes(s *Server, maxBytes int32) int32 {
	if !f.ok {
		return maxBytes
	}
	allowed := f.limit * s.quotas.Window().Seconds()
	if float64(maxBytes) > allowed {
		return int32(max(allowed, 1))
	}
	return maxBytes
}

// charge charges the bytes a fetch returns and returns the throttle.
func (f fetchQuota) charge(s *Server, bytes int) time.Duration {
	if !f.ok || bytes == 0 {
		return 0
	}
	d := s.quotas.Record(f.key, f.limit, float64(bytes))
	if d > 0 {
		s.metrics.throttled(quota.FetchBytes)
	}
	return d
}

// throttledFetch is the answer to a consumer that owes a wait: no
// partitions, the wait in throttle_time_ms (Kafka's throttled fetch
// response). The session, if any, is left as it was.
func throttledFetch(resp *kmsg.FetchResponse, sessionID int32) *kmsg.FetchResponse {
	resp.SessionID = sessionID
	resp.Topics = nil
	return resp
}

// mutationQuota is a request's controller_mutation_rate (KIP-599): the
// partitions it may create or delete. From the versions that know
// THROTTLING_QUOTA_EXCEEDED (CreateTopics v6, CreatePartitions v3,
// DeleteTopics v5) it is strict: while the client owes a wait, each
// further topic is refused with that error and the time; an admitted
// topic is charged whole, so one large topic goes through and the next
// waits. Older versions cannot be refused this way: they are charged and
// throttled (throttle_time_ms and the mute) instead.
type mutationQuota struct {
	strict bool
	limit  float64
	key    quota.SensorKey
	ok     bool
}

func (s *Server) mutationQuotaFor(req *request, strictFrom int16, validateOnly bool) mutationQuota {
	if validateOnly {
		return mutationQuota{} // nothing is mutated
	}
	qc, ok := s.quotaClient(req)
	if !ok {
		return mutationQuota{}
	}
	limit, key, ok := quota.Resolve(s.image().ClientQuota, quota.ControllerMutations, qc)
	return mutationQuota{strict: req.version >= strictFrom, limit: limit, key: key, ok: ok}
}

// admit charges partitions mutations for one topic, or refuses the topic
// while the client owes a wait (strict versions only).
func (m mutationQuota) admit(s *Server, req *request, partitions int) error {
	if !m.ok || partitions <= 0 {
		return nil
	}
	if m.strict {
		if d := s.quotas.Check(m.key, m.limit); d > 0 {
			s.metrics.throttled(quota.ControllerMutations)
			req.throttle = max(req.throttle, d)
			return fmt.Errorf("%w: controller_mutation_rate %v partitions a second: retry in %v",
				kerr.ThrottlingQuotaExceeded, m.limit, d.Round(time.Millisecond))
		}
	}
	if d := s.quotas.Record(m.key, m.limit, float64(partitions)); d > 0 {
		s.metrics.throttled(quota.ControllerMutations)
		req.throttle = max(req.throttle, d)
	}
	return nil
}

// createdPartitions is the partitions creating ct makes, for
// controller_mutation_rate: its assignment's, its count, or, for the
// controller's default (-1, which this node does not know), one.
func createdPartitions(ct controlplane.CreateTopic) int {
	switch {
	case len(ct.Assignments) > 0:
		return len(ct.Assignments)
	case ct.NumPartitions > 0:
		return int(ct.NumPartitions)
	}
	return 1
}

// admitConnectionRate charges a connection from addr to its
// connection_creation_rate (KIP-612), if one is set: false refuses it. A
// refused attempt is not charged, so a flood is admitted at the rate and
// no slower. Brokers' addresses never get here (connlimit.go).
func (s *Server) admitConnectionRate(addr netip.Addr) bool {
	img := s.image()
	if len(img.ClientQuotas) == 0 {
		return true
	}
	limit, key, ok := quota.ResolveIP(img.ClientQuota, addr.String())
	if !ok {
		return true
	}
	if s.quotas.Record(key, limit, 1) > 0 {
		s.quotas.Unrecord(key, limit, 1)
		return false
	}
	return true
}
