package embed_test

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"
)

// metricName finds the Baton series a query names.
var metricName = regexp.MustCompile(`\bbaton_[a-z0-9_]+`)

// checkDocsMetrics checks the dashboard and the alerting rules the docs
// ship against fams, a member's /metrics: each is well formed (a Grafana
// dashboard whose panels have queries; Prometheus rule groups with the
// alerts operators need), and every series their queries name is one the
// member shows (a histogram's _bucket, _sum and _count among them).
func checkDocsMetrics(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	shown := map[string]bool{}
	for name, f := range fams {
		shown[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			shown[name+"_bucket"], shown[name+"_sum"], shown[name+"_count"] = true, true, true
		}
	}
	check := func(where, query string) {
		names := metricName.FindAllString(query, -1)
		if len(names) == 0 {
			t.Errorf("%s: query %q names no Baton series", where, query)
		}
		for _, n := range names {
			if !shown[n] {
				t.Errorf("%s: query %q names %s, which /metrics does not show", where, query, n)
			}
		}
	}

	b, err := os.ReadFile("../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title         string
		SchemaVersion int
		Panels        []struct {
			Title, Type string
			Targets     []struct{ Expr, RefID string }
		}
		Templating struct {
			List []struct{ Name, Type, Definition string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/grafana-dashboard.json: %v", err)
	}
	if dash.Title == "" || dash.SchemaVersion == 0 || len(dash.Panels) == 0 {
		t.Errorf("docs/grafana-dashboard.json is no Grafana dashboard: title %q, schema %d, %d panels", dash.Title, dash.SchemaVersion, len(dash.Panels))
	}
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			check("dashboard panel "+p.Title, q.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if v.Type == "query" {
			check("dashboard variable "+v.Name, v.Definition)
		}
	}

	b, err = os.ReadFile("../docs/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Expr, For string
				Labels           map[string]string
				Annotations      map[string]string
			}
		}
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatalf("docs/alerts.yml: %v", err)
	}
	var alerts []string
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			if r.Alert == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" {
				t.Errorf("alert %q (group %q) lacks a name, a severity or a summary", r.Alert, g.Name)
			}
			check("alert "+r.Alert, r.Expr)
		}
	}
	for _, want := range []string{"BatonNoLeader", "BatonHoldTooOld", "BatonQueueTooDeep", "BatonSessionsNearLimit", "BatonDiskLow", "BatonFsyncSlow"} {
		if !slices.Contains(alerts, want) {
			t.Errorf("docs/alerts.yml has no %s alert", want)
		}
	}
}
