package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/fjordmq/fjord/internal/node"
	"github.com/fjordmq/fjord/internal/testutil"
)

// newEnvHTTP is newEnv with the HTTP API's settings (and the node's
// auto-create-topics) given.
func newEnvHTTP(t testing.TB, autoCreate bool, http node.HTTPConfig) *env {
	t.Helper()
	return newEnvWith(t, node.Config{
		NodeID: 1, DataDir: t.TempDir(), AutoCreateTopics: autoCreate,
		KafkaAddr: "127.0.0.1:0", ControllerAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		HTTP: http, Logger: slog.New(slog.DiscardHandler),
	})
}

// createTopicWith creates a one-partition topic with configs.
func (e *env) createTopicWith(name string, configs map[string]string) {
	e.t.Helper()
	c := map[string]*string{}
	for k, v := range configs {
		c[k] = &v
	}
	resp, err := e.adm.CreateTopic(context.Background(), 1, 1, c, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// Regression (issue 12): records over franz-go's 1 MB batch default were
// refused by the gateway's own client, in a message blaming the server,
// whatever the topic's max.message.bytes. Now the topic's
// max.message.bytes decides, and each too-large answer names its limit
// and who set it.
func TestLargeRecords(t *testing.T) {
	const bodyLimit = 32 << 20
	e := newEnvHTTP(t, false, node.HTTPConfig{MaxBodyBytes: bodyLimit})
	const topicLimit = 16 << 20
	e.createTopicWith("big", map[string]string{"max.message.bytes": strconv.Itoa(topicLimit)})
	value := func(n int) string {
		return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, n))
	}
	for _, size := range []int{1 << 20, 5 << 20, 15 << 20} {
		var res result
		if st := e.do("POST", "/v1/topics/big/produce", `{"value": "`+value(size)+`"}`, &res); st != 200 {
			t.Fatalf("%d byte record: %d %+v", size, st, res)
		}
		var read struct {
			Records []struct {
				Value string `json:"value"`
			} `json:"records"`
		}
		if st := e.do("GET", fmt.Sprintf("/v1/topics/big/partitions/0/records?offset=%d", res.Offset), "", &read); st != 200 ||
			len(read.Records) == 0 || read.Records[0].Value != value(size) {
			t.Fatalf("%d byte record read back: %d, %d records", size, st, len(read.Records))
		}
	}

	// Over the topic's max.message.bytes: 413, naming the setting, the
	// topic and its value.
	var res result
	if st := e.do("POST", "/v1/topics/big/produce", `{"value": "`+value(topicLimit+1)+`"}`, &res); st != 413 ||
		res.Error != "record_too_large" || !strings.Contains(res.Message, "max.message.bytes") ||
		!strings.Contains(res.Message, strconv.Itoa(topicLimit)) || !strings.Contains(res.Message, `"big"`) {
		t.Fatalf("record over the topic's limit: %d %+v", st, res)
	}
	// Over the body limit: 413, naming the limit and its flag.
	if st := e.do("POST", "/v1/topics/big/produce", `{"value": "`+value(bodyLimit)+`"}`, &res); st != 413 ||
		res.Error != "body_too_large" || !strings.Contains(res.Message, strconv.Itoa(bodyLimit)) ||
		!strings.Contains(res.Message, "http-max-body-bytes") {
		t.Fatalf("body over the limit: %d %+v", st, res)
	}
	// A topic with the default max.message.bytes still refuses 2 MiB,
	// saying so.
	e.createTopic("small", 1)
	if st := e.do("POST", "/v1/topics/small/produce", `{"value": "YQ=="}`, &res); st != 200 {
		t.Fatalf("small record: %d %+v", st, res)
	}
	if st := e.do("POST", "/v1/topics/small/produce", `{"value": "`+value(2<<20)+`"}`, &res); st != 413 ||
		res.Error != "record_too_large" || !strings.Contains(res.Message, "max.message.bytes") || !strings.Contains(res.Message, "1048588") {
		t.Fatalf("2 MiB record, default topic: %d %+v", st, res)
	}
	// Raised after the gateway's producers learned the topic: they learn
	// the new limit (within the second the gateway keeps a topic's
	// metadata).
	v := strconv.Itoa(4 << 20)
	if _, err := e.adm.AlterTopicConfigs(context.Background(), []kadm.AlterConfig{{Name: "max.message.bytes", Value: &v}}, "small"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if st := e.do("POST", "/v1/topics/small/produce", `{"value": "`+value(2<<20)+`"}`, &res); st != 200 {
			return fmt.Errorf("2 MiB record after max.message.bytes was raised to 4 MiB: %d %+v", st, res)
		}
		return nil
	})
}

// Many records produced at once to a topic whose max.message.bytes is
// small are each accepted: the gateway's client batches no more than the
// topic takes.
func TestConcurrentProducesRespectTopicLimit(t *testing.T) {
	e := newEnv(t)
	const limit = 64 << 10
	e.createTopicWith("tight", map[string]string{"max.message.bytes": strconv.Itoa(limit)})
	body := `{"value": "` + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 20<<10)) + `"}`
	errs := make(chan string, 32)
	for range cap(errs) {
		go func() {
			var res result
			st := e.do("POST", "/v1/topics/tight/produce", body, &res)
			if st != 200 {
				errs <- fmt.Sprintf("%d %+v", st, res)
				return
			}
			errs <- ""
		}()
	}
	for range cap(errs) {
		if msg := <-errs; msg != "" {
			t.Error(msg)
		}
	}
}
