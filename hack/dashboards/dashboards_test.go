package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const grafanaDir = "../../config/grafana"

// TestCommittedDashboardsAreGenerated: config/grafana holds exactly what make dashboards
// writes, so a change to dashboards.go without regenerating fails here.
func TestCommittedDashboardsAreGenerated(t *testing.T) {
	var want []string
	for _, s := range dashboards {
		b, err := render(s)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(grafanaDir, s.file+".json"))
		require.NoError(t, err, "run make dashboards")
		assert.Equal(t, string(b), string(got), "%s.json differs from dashboards.go: run make dashboards", s.file)
		want = append(want, s.file+".json")
	}
	files, err := filepath.Glob(filepath.Join(grafanaDir, "*.json"))
	require.NoError(t, err)
	for i := range files {
		files[i] = filepath.Base(files[i])
	}
	assert.ElementsMatch(t, want, files, "config/grafana holds a JSON file no dashboard writes")
}

// TestDashboardsPassTheSchema: each committed dashboard unmarshals strictly (no field the
// SDK's schema does not know) and passes the SDK's Validate.
func TestDashboardsPassTheSchema(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	for _, s := range dashboards {
		b, err := os.ReadFile(filepath.Join(grafanaDir, s.file+".json"))
		require.NoError(t, err)
		var d dashboard.Dashboard
		require.NoError(t, sdkErr(d.UnmarshalJSONStrict(b)), s.file)
		require.NoError(t, sdkErr(d.Validate()), s.file)
		assert.Equal(t, s.uid, *d.Uid)
	}
	// The same checks refuse a field the schema does not know and a value out of its range.
	var d dashboard.Dashboard
	const minimal = `{"title": "x", "schemaVersion": 42, "templating": {"list": []}, "annotations": {"list": []}`
	assert.Error(t, sdkErr(d.UnmarshalJSONStrict([]byte(minimal+`, "panelz": []}`))), "unknown field")
	require.NoError(t, sdkErr(d.UnmarshalJSONStrict([]byte(minimal+`, "fiscalYearStartMonth": 12}`))))
	assert.Error(t, sdkErr(d.Validate()), "fiscalYearStartMonth must be < 12")
}

// sdkErr is err, or nil when it is the SDK's empty list of errors (its methods return
// their cog.BuildErrors as an error, non-nil when empty).
func sdkErr(err error) error {
	var be cog.BuildErrors
	if errors.As(err, &be) && len(be) == 0 {
		return nil
	}
	return err
}

// exported is what the manager's /metrics endpoint serves, by series name: its labels.
type exported map[string][]string

// targetLabels are the labels a scrape adds to every series (Prometheus's own, and those
// of the Prometheus operator's ServiceMonitor).
var targetLabels = []string{"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

var metricRow = regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\|")

// readExported reads docs/METRICS.md's tables: the quartet_* metrics (which
// test/alerts checks against the code, labels included) and the other series the
// dashboards read (controller-runtime's, the Go runtime's and the process's, and up).
func readExported(t *testing.T) exported {
	t.Helper()
	doc, err := os.ReadFile("../../docs/METRICS.md")
	require.NoError(t, err)
	out := exported{}
	for _, m := range metricRow.FindAllStringSubmatch(string(doc), -1) {
		var labels []string
		for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[3], -1) {
			labels = append(labels, l[1])
		}
		if m[2] == "histogram" {
			out[m[1]+"_count"] = labels
			out[m[1]+"_sum"] = labels
			out[m[1]+"_bucket"] = append(slices.Clone(labels), "le")
			continue
		}
		out[m[1]] = labels
	}
	require.Contains(t, out, "quartet_chaosagent_actions_total", "docs/METRICS.md's table")
	require.Contains(t, out, "controller_runtime_reconcile_total", "docs/METRICS.md's table of other series")
	return out
}

// grafanaVar is a Grafana variable in a query: $name, ${name}, $__rate_interval...
var grafanaVar = regexp.MustCompile(`\$\{?([A-Za-z_]+)\}?`)

// promQL makes a panel's query plain PromQL as Grafana sends it: windows become 5m,
// other variables a value.
func promQL(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		if strings.Contains(v, "__rate_interval") || strings.Contains(v, "__interval") {
			return "5m"
		}
		return ".+"
	})
}

var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_]+)\s*\}\}`)

// check returns what is wrong with a query: a series name the manager does not export, a
// label (selected, grouped or matched on, or in the legend) that none of its series has.
func (e exported) check(expr, legend string) error {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(promQL(expr))
	if err != nil {
		return err
	}
	var problems []string
	labelsOf := func(n parser.Node) []string {
		ls := slices.Clone(targetLabels)
		parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok {
				ls = append(ls, e[vs.Name]...)
			}
			return nil
		})
		return ls
	}
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			labels, ok := e[n.Name]
			if !ok {
				problems = append(problems, fmt.Sprintf("%q is not a series the manager exports (docs/METRICS.md)", n.Name))
				return nil
			}
			for _, m := range n.LabelMatchers {
				if m.Name != "__name__" && !slices.Contains(labels, m.Name) && !slices.Contains(targetLabels, m.Name) {
					problems = append(problems, fmt.Sprintf("%s has no label %q", n.Name, m.Name))
				}
			}
		case *parser.AggregateExpr:
			have := labelsOf(n.Expr)
			for _, l := range n.Grouping {
				if !slices.Contains(have, l) {
					problems = append(problems, fmt.Sprintf("grouping by %q, which none of %s has", l, n.Expr))
				}
			}
		case *parser.BinaryExpr:
			if n.VectorMatching != nil {
				have := append(labelsOf(n.LHS), labelsOf(n.RHS)...)
				for _, l := range append(slices.Clone(n.VectorMatching.MatchingLabels), n.VectorMatching.Include...) {
					if !slices.Contains(have, l) {
						problems = append(problems, fmt.Sprintf("matching on %q, which neither side has", l))
					}
				}
			}
		}
		return nil
	})
	have := labelsOf(ast)
	for _, m := range legendLabel.FindAllStringSubmatch(legend, -1) {
		if !slices.Contains(have, m[1]) {
			problems = append(problems, fmt.Sprintf("legend names %q, which no series of the query has", m[1]))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// committedQueries returns each committed dashboard's panel queries (with their legends)
// and its variables' label_values queries, as "file: panel" -> query.
func committedQueries(t *testing.T) (panels map[string][]query, variables map[string]string) {
	t.Helper()
	panels, variables = map[string][]query{}, map[string]string{}
	files, err := filepath.Glob(filepath.Join(grafanaDir, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var d struct {
			Panels []struct {
				Title   string `json:"title"`
				Type    string `json:"type"`
				Targets []struct {
					Expr   string `json:"expr"`
					Legend string `json:"legendFormat"`
				} `json:"targets"`
			} `json:"panels"`
			Templating struct {
				List []struct {
					Name  string `json:"name"`
					Type  string `json:"type"`
					Query any    `json:"query"`
				} `json:"list"`
			} `json:"templating"`
		}
		require.NoError(t, json.Unmarshal(b, &d), f)
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			key := filepath.Base(f) + ": " + p.Title
			require.NotEmpty(t, p.Targets, key)
			for _, tg := range p.Targets {
				panels[key] = append(panels[key], query{tg.Expr, tg.Legend})
			}
		}
		for _, v := range d.Templating.List {
			if v.Type == "query" {
				q, ok := v.Query.(string)
				require.True(t, ok, "%s: variable %s: query %v", f, v.Name, v.Query)
				variables[filepath.Base(f)+": $"+v.Name] = q
			}
		}
	}
	return panels, variables
}

var labelValues = regexp.MustCompile(`^label_values\((.+), ([a-z_]+)\)$`)

// TestQueriesNameOnlyExportedSeries: every panel query and every variable of the committed
// dashboards parses as PromQL and names only series and labels the manager exports.
func TestQueriesNameOnlyExportedSeries(t *testing.T) {
	e := readExported(t)
	panels, variables := committedQueries(t)
	n := 0
	for key, qs := range panels {
		for _, q := range qs {
			assert.NoError(t, e.check(q.expr, q.legend), "%s: %s", key, q.expr)
			n++
		}
	}
	for key, q := range variables {
		m := labelValues.FindStringSubmatch(q)
		require.NotNil(t, m, "%s: %s is not label_values(selector, label)", key, q)
		assert.NoError(t, e.check(m[1], "{{"+m[2]+"}}"), "%s: %s", key, q)
	}
	t.Logf("%d queries of %d panels and %d variables checked", n, len(panels), len(variables))
}

// TestTheQueryCheckFindsWhatIsWrong: the check above fails on each kind of mistake.
func TestTheQueryCheckFindsWhatIsWrong(t *testing.T) {
	e := readExported(t)
	for name, tc := range map[string]struct{ expr, legend, want string }{
		"unknown series":             {`rate(quartet_copyrator_copies_written_total[5m])`, "", "not a series"},
		"histogram without suffix":   {`quartet_copyrator_propagation_seconds`, "", "not a series"},
		"unknown label selected":     {`quartet_registrymirror_ready{mirror_name="x"}`, "", `no label "mirror_name"`},
		"unknown label grouped":      {`sum by (rule) (quartet_registrymirror_ready)`, "", `grouping by "rule"`},
		"unknown label matched on":   {`quartet_registrymirror_ready and on (agent) quartet_registrymirror_upstream_reachable`, "", `matching on "agent"`},
		"unknown label in legend":    {`quartet_chaosagent_rounds_total`, "{{mirror}}", `legend names "mirror"`},
		"not PromQL":                 {`sum by (agent (quartet_chaosagent_rounds_total)`, "", "unexpected"},
		"le only on buckets":         {`sum by (le) (quartet_exchangerate_upstream_fetch_duration_seconds_count)`, "", `grouping by "le"`},
		"variable in a bad selector": {`quartet_chaosagent_rounds_total{agnt=~"$agent"}`, "", `no label "agnt"`},
	} {
		t.Run(name, func(t *testing.T) {
			err := e.check(tc.expr, tc.legend)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	require.NoError(t, e.check(`sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{job=~"$job"}[$__rate_interval]))`, "{{controller}}"))
}
