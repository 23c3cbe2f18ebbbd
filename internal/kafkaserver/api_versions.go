package kafkaserver

// ApiVersions: v0-3
//
// Answers with exactly the apis table (both halves), so a client never
// sees an API advertised that the server would refuse, or misses one it
// serves. The response header is always v0, even for v3 (flexible): its
// tagged fields live in the body only (ApiVersionsResponse.json: "Tagged
// fields are only supported in the body but not in the header"), so a
// client can read the answer before it knows whether we speak flexible
// versions. Redpanda once broke librdkafka here (redpanda #296).
//
// Fjord's own requests (internal/fjordmsg, keys from 10000) are listed
// only for a v3+ request whose client software name is Fjord's
// (fjordmsg.SoftwareName): a Kafka client never sees a key it does not
// know, which some clients could mistake for a broker they cannot talk
// to.
//
// A version above 3 never reaches this handler: the connection answers
// it with a v0 response carrying UNSUPPORTED_VERSION and the ranges, and
// the client retries with one we serve (see conn.dispatch).
//
// v3+ carries the client's software name and version (KIP-511); both
// must match [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? or the answer is
// INVALID_REQUEST, still with the ranges, as Kafka does.
//
// Features (v3+): transaction.version is supported 0-2 and finalized at
// 2, Transactions V2 (KIP-890 part 2): a client that reads it (franz-go,
// Kafka 4's) ends each transaction with EndTxn v5, which bumps the
// producer epoch, and lets Produce v12 and TxnOffsetCommit v5 add their
// partitions to the transaction (apis_txn.go); every other client keeps
// the V1 path, which stays served. As Kafka, v3 answers leave a feature
// whose minimum is 0 out of SupportedFeatures (clients of v3 took a
// minimum of 0 to mean not supported, KIP-1022: only v4 may list it, and
// v4 is not served), and the finalized features carry an epoch that
// never goes down: the level is the
// binary's, not the metadata log's, so every node of one build finalizes
// the same, and the epoch is fixed.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fjordmq/fjord/internal/fjordmsg"
)

func handleAPIVersions(_ context.Context, _ *Server, req *request) (kmsg.Response, func(), error) {
	body := req.body.(*kmsg.ApiVersionsRequest)
	resp := body.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = advertisedAPIKeys(req.version >= 3 && body.ClientSoftwareName == fjordmsg.SoftwareName)
	if req.version >= 3 {
		ff := kmsg.NewApiVersionsResponseFinalizedFeature()
		ff.Name, ff.MinVersionLevel, ff.MaxVersionLevel = transactionVersionFeature, transactionVersion, transactionVersion
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, ff)
		resp.FinalizedFeaturesEpoch = finalizedFeaturesEpoch
	}
	if req.version >= 3 && (!validSoftwareField(body.ClientSoftwareName) || !validSoftwareField(body.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	return resp, nil, nil
}

// The transaction.version feature (KIP-890, KIP-1022), finalized at 2.
const (
	transactionVersionFeature = "transaction.version"
	transactionVersion        = 2
	// finalizedFeaturesEpoch is the finalized features' epoch: 1 since
	// transaction.version 2 was first finalized, never lower.
	finalizedFeaturesEpoch = 1
)

// advertisedAPIKeys lists the apis table, sorted by key as Kafka sends
// it; Fjord's own keys only when fjord (the client named itself Fjord's).
func advertisedAPIKeys(fjord bool) []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, a := range apis {
		if !fjord && fjordmsg.IsFjordKey(a.key) {
			continue
		}
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.minVersion, a.maxVersion
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// validSoftwareField is KIP-511's pattern
// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?, written out: one or more
// of letters, digits, '-' and '.', starting and ending with a letter or
// digit.
func validSoftwareField(s string) bool {
	if s == "" {
		return false
	}
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '-' && c != '.' {
			return false
		}
	}
	return alnum(s[0]) && alnum(s[len(s)-1])
}
