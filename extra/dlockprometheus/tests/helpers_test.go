package dlockprometheus_test

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// samples parses an exposition in the text format into its samples, keyed
// by the series as the format writes it: `name{label="value",...}`. It
// fails the test on a malformed exposition.
func samples(t *testing.T, text []byte) map[string]float64 {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	if _, err := p.TextToMetricFamilies(bytes.NewReader(text)); err != nil {
		t.Fatalf("TextToMetricFamilies = %v, want a valid exposition:\n%s", err, text)
	}
	got := make(map[string]float64)
	for line := range strings.Lines(string(text)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample line %q: %v", line, err)
		}
		got[line[:i]] = v
	}
	return got
}

// collect returns the samples of c's metrics named names (all if none),
// gathered through a pedantic registry, which checks them.
func collect(t *testing.T, c prometheus.Collector, names ...string) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("Register = %v", err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather = %v", err)
	}
	var text bytes.Buffer
	for _, f := range fams {
		if len(names) == 0 || slices.Contains(names, f.GetName()) {
			if _, err := expfmt.MetricFamilyToText(&text, f); err != nil {
				t.Fatalf("MetricFamilyToText = %v", err)
			}
		}
	}
	return samples(t, text.Bytes())
}

// want checks that the samples have series with value v.
func want(t *testing.T, got map[string]float64, series string, v float64) {
	t.Helper()
	if g, ok := got[series]; !ok || g != v {
		t.Errorf("Got(%s) = %v (present: %t), want %v", series, g, ok, v)
	}
}

// dlockLines returns the sample lines of text whose metric starts with
// "dlock_", or with one of prefixes if any are given, for the log.
func dlockLines(text []byte, prefixes ...string) string {
	if len(prefixes) == 0 {
		prefixes = []string{"dlock_"}
	}
	var b strings.Builder
	for line := range strings.Lines(string(text)) {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				b.WriteString(line)
				break
			}
		}
	}
	return b.String()
}
