// Tests of config/prometheus/prometheusrule.yaml with promtool (built from the
// Go module proxy; make test passes it in PROMTOOL): the rules load, every alert fires on
// the synthetic series of testdata/alerts.test.yaml when it should and stays quiet when it
// should not, and docs/METRICS.md lists every metric and alert. test/e2e/alerts_test.go
// runs the same expressions in a real Prometheus against the in-cluster manager.

package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	require.NoError(t, err)
	return dir
}

func readRules(t *testing.T) RuleFile {
	t.Helper()
	rf, err := ReadRules(root(t))
	require.NoError(t, err)
	return rf
}

// promtool runs `promtool test rules` on the unit tests with rules written next to them.
func promtool(t *testing.T, rf RuleFile) (string, error) {
	t.Helper()
	bin := os.Getenv("PROMTOOL")
	if bin == "" {
		t.Skip("PROMTOOL is not set (make test builds promtool and sets it)")
	}
	dir := t.TempDir()
	require.NoError(t, WriteRuleFile(rf, filepath.Join(dir, "rules.yaml")))
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts.test.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.test.yaml"), tests, 0o600))
	if out, err := exec.Command(bin, "check", "rules", filepath.Join(dir, "rules.yaml")).CombinedOutput(); err != nil {
		return string(out), err
	}
	cmd := exec.Command(bin, "test", "rules", "alerts.test.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestAlertsPassTheirUnitTests(t *testing.T) {
	out, err := promtool(t, readRules(t))
	require.NoError(t, err, out)
	assert.Contains(t, out, "SUCCESS")
}

// TestEveryAlertIsExpectedToFire proves the unit tests can fail: with any one alert's
// expression replaced by one that is never true, promtool must report that alert.
func TestEveryAlertIsExpectedToFire(t *testing.T) {
	rf := readRules(t)
	for gi := range rf.Groups {
		for ri := range rf.Groups[gi].Rules {
			name := rf.Groups[gi].Rules[ri].Alert
			t.Run(name, func(t *testing.T) {
				broken := readRules(t)
				broken.Groups[gi].Rules[ri].Expr = "vector(1) == 0"
				out, err := promtool(t, broken)
				require.Error(t, err, "promtool passed with %s never firing:\n%s", name, out)
				assert.Contains(t, out, "alertname: "+name)
			})
		}
	}
}

// The seven things an admin alerts on, each by the metric that tells.
var covered = map[string]string{
	"reconcile errors":          "controller_runtime_reconcile_errors_total",
	"chaos actions failing":     "quartet_chaosagent_actions_total",
	"copies in conflict":        "quartet_copyrator_conflicts",
	"exchange rates stale":      "quartet_exchangerate_stale",
	"registry mirror not ready": "quartet_registrymirror_ready",
	"images in use not cached":  "quartet_registrymirror_images_cached",
	"mirror cache almost full":  "quartet_registrymirror_cache_capacity_bytes",
}

func TestAlertsAreCompleteAndExplained(t *testing.T) {
	all := readRules(t).Alerts()
	for what, metric := range covered {
		n := 0
		for _, a := range all {
			if strings.Contains(a.Expr, metric) {
				n++
			}
		}
		assert.Equal(t, 1, n, "alerts on %s (%s)", what, metric)
	}
	for _, a := range all {
		assert.Contains(t, []string{"warning", "critical"}, a.Labels["severity"], "%s: severity", a.Alert)
		assert.NotEmpty(t, a.Annotations["summary"], "%s: summary", a.Alert)
		assert.NotEmpty(t, a.Annotations["description"], "%s: description", a.Alert)
	}
}

var (
	metricName = regexp.MustCompile(`(?:Name:\s+|NewDesc\()"(quartet_[a-z_]+)"`)
	tableRow   = regexp.MustCompile("(?m)^\\| `((?:quartet|controller_runtime)_[a-z_]+)` \\| [a-z]+ \\|([^|]*)\\|")
	alertRow   = regexp.MustCompile("(?m)^\\| `(Quartet[A-Za-z]+)`")
	// The end of a collector's options: its label names (a list, or a variable holding one),
	// or none.
	labelsArg  = regexp.MustCompile(`\}\s*,\s*(?:\[\]string\{([^}]*)\}|([A-Za-z]+))\s*\)|\}\s*\)`)
	quoted     = regexp.MustCompile(`"([a-z_]+)"`)
	backquoted = regexp.MustCompile("`([a-z_]+)`")
)

// codeMetrics returns the quartet_ metrics of controllers/*/metrics.go with their label
// names, in order.
func codeMetrics(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), "controllers", "*", "metrics.go"))
	require.NoError(t, err)
	require.Len(t, files, 4, "one metrics.go per controller")
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		src := string(b)
		for _, m := range metricName.FindAllStringSubmatchIndex(src, -1) {
			name := src[m[2]:m[3]]
			l := labelsArg.FindStringSubmatch(src[m[1]:])
			require.NotNil(t, l, "%s: the end of %s's options", f, name)
			list := l[1]
			if l[2] != "" { // a variable: var <name> = []string{...}
				v := regexp.MustCompile(`var ` + l[2] + ` = \[\]string\{([^}]*)\}`).FindStringSubmatch(src)
				require.NotNil(t, v, "%s: %s's labels %s", f, name, l[2])
				list = v[1]
			}
			var labels []string
			for _, q := range quoted.FindAllStringSubmatch(list, -1) {
				labels = append(labels, q[1])
			}
			out[name] = strings.Join(labels, ",")
		}
	}
	return out
}

// TestMetricsTableMatchesTheCode: docs/METRICS.md lists exactly the metrics the
// controllers register, each with the label names the code gives it (in order), and
// exactly the alerts of the PrometheusRule.
func TestMetricsTableMatchesTheCode(t *testing.T) {
	inCode := codeMetrics(t)
	require.Contains(t, inCode, "quartet_registrymirror_ready")
	assert.Equal(t, "mirror_namespace,mirror", inCode["quartet_registrymirror_ready"], "a label list held by a variable")
	assert.Equal(t, "source", inCode["quartet_exchangerate_upstream_fetch_duration_seconds"], "a histogram's labels")
	assert.Empty(t, inCode["quartet_copyrator_orphans_swept_total"], "a collector without labels")
	doc, err := os.ReadFile(filepath.Join(root(t), "docs", "METRICS.md"))
	require.NoError(t, err)
	inDoc := map[string]string{}
	for _, m := range tableRow.FindAllStringSubmatch(string(doc), -1) {
		if strings.HasPrefix(m[1], "quartet_") {
			var labels []string
			for _, l := range backquoted.FindAllStringSubmatch(m[2], -1) {
				labels = append(labels, l[1])
			}
			inDoc[m[1]] = strings.Join(labels, ",")
		}
	}
	assert.Equal(t, inCode, inDoc, "quartet_ metrics and their labels in controllers/*/metrics.go vs the table of docs/METRICS.md")

	var alertNames, alertDoc []string
	for _, a := range readRules(t).Alerts() {
		alertNames = append(alertNames, a.Alert)
	}
	for _, m := range alertRow.FindAllStringSubmatch(string(doc), -1) {
		alertDoc = append(alertDoc, m[1])
	}
	sort.Strings(alertNames)
	sort.Strings(alertDoc)
	assert.Equal(t, alertNames, alertDoc, "alerts of config/prometheus vs docs/METRICS.md")
}

var (
	named           = regexp.MustCompile(`Named\("([a-z]+)"\)`)
	controllerMatch = regexp.MustCompile(`controller=~"([a-z|]+)"`)
)

// TestReconcileErrorAlertSelectsTheManagersControllers: the controller names the alert
// selects are exactly the ones the four controllers register under.
func TestReconcileErrorAlertSelectsTheManagersControllers(t *testing.T) {
	var names []string
	files, err := filepath.Glob(filepath.Join(root(t), "controllers", "*", "*.go"))
	require.NoError(t, err)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range named.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	require.Len(t, names, 4)
	for _, a := range readRules(t).Alerts() {
		if a.Alert != "QuartetReconcileErrors" {
			continue
		}
		m := controllerMatch.FindStringSubmatch(a.Expr)
		require.NotNil(t, m, a.Expr)
		selected := strings.Split(m[1], "|")
		sort.Strings(selected)
		assert.Equal(t, names, selected)
		return
	}
	t.Fatal("no QuartetReconcileErrors alert")
}
