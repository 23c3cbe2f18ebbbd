package testutil

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is a parsed Prometheus scrape, by family name.
type Metrics map[string]*dto.MetricFamily

// Scrape GETs url, a /metrics endpoint, with client (nil:
// http.DefaultClient) and parses it with Prometheus's own text parser,
// so a line a Prometheus server would reject fails the test.
func Scrape(t testing.TB, client *http.Client, url string) Metrics {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s does not parse: %v", url, err)
	}
	return families
}

// Value is the value of family's first series whose labels include each
// of labels ("name=value"): a counter's or gauge's value, a histogram's
// count of observations. found is false when no series matches.
func (m Metrics) Value(family string, labels ...string) (v float64, found bool) {
	for _, s := range m[family].GetMetric() {
		if hasLabels(s, labels) {
			return value(s), true
		}
	}
	return 0, false
}

// ByLabel is the values of family's series whose labels include each of
// labels, keyed by their value of label.
func (m Metrics) ByLabel(family, label string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m[family].GetMetric() {
		if !hasLabels(s, labels) {
			continue
		}
		for _, l := range s.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] = value(s)
			}
		}
	}
	return out
}

func hasLabels(s *dto.Metric, labels []string) bool {
	have := map[string]bool{}
	for _, l := range s.GetLabel() {
		have[l.GetName()+"="+l.GetValue()] = true
	}
	for _, l := range labels {
		if !have[l] {
			return false
		}
	}
	return true
}

func value(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.GetCounter().GetValue()
	case s.Gauge != nil:
		return s.GetGauge().GetValue()
	case s.Histogram != nil:
		return float64(s.GetHistogram().GetSampleCount())
	case s.Untyped != nil:
		return s.GetUntyped().GetValue()
	}
	return 0
}
