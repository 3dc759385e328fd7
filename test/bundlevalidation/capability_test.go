package bundlevalidation

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/test/alerts"
)

// capabilityLevels are OperatorHub's capability levels, lowest first; a level includes
// every level below it.
var capabilityLevels = []string{"Basic Install", "Seamless Upgrades", "Full Lifecycle", "Deep Insights", "Auto Pilot"}

// capabilityEvidence names, per level, the tests that show Quartet reaches it (file and
// test function). CI runs them: make test, make olm-e2e and make e2e. docs/OLM.md explains
// each. A level without evidence here cannot be claimed.
var capabilityEvidence = map[string][]string{
	// OLM installs the bundle from a catalog in each install mode; every CR is reconciled.
	"Basic Install": {
		"test/olm/install_test.go:TestInstallUpgradeAndTheFourControllers",
		"test/olm/modes_test.go:TestInstallModes",
	},
	// 0.1.0 → 0.3.0 through the catalog: CRs kept (ChaosAgent storage moves to v1beta1),
	// the mirror's pods roll to the new operator image and keep their cache PVC. 0.2.0 (its
	// own code) → 0.3.0: rules and mirrors that relied on 0.2.0's reach say what consent is
	// missing, and resume once the admin gives it.
	"Seamless Upgrades": {
		"test/olm/install_test.go:TestInstallUpgradeAndTheFourControllers",
		"test/olm/upgrade_test.go:TestUpgradeFrom020AsksForConsent",
	},
	// Fail-over to the cache when the upstream is gone and back to the upstream when the
	// mirror is deleted; credentials re-configured without restarts; every change a
	// ChaosAgent makes recorded first and restored; recovery from containerd, kubelet and
	// manager failures; the cache volume grown in place and removed with its mirror.
	"Full Lifecycle": {
		"test/e2e/mirror_test.go:TestMirrorServesPullsAndOutlivesItsUpstream",
		"test/e2e/mirror_test.go:TestMirrorCredentialsFromSecret",
		"test/e2e/chaos_test.go:TestChaosCancerAndIpsumAreUndone",
		"test/e2e/faults_test.go:TestFaultsOnTheRealNode",
		"controllers/registrymirror/controller_test.go:TestMirrorLifecycle",
	},
	// Metrics per controller and alerts on them, tested against synthetic series and
	// against the in-cluster manager's real metrics endpoint; the CSV's description says how
	// to add the ServiceMonitor and the alerts (checked below), which the bundle cannot carry
	// (TestBundleCSVContract/monitoring).
	"Deep Insights": {
		"test/alerts/alerts_test.go:TestAlertsPassTheirUnitTests",
		"test/alerts/alerts_test.go:TestEveryAlertIsExpectedToFire",
		"test/alerts/alerts_test.go:TestMetricsTableMatchesTheCode",
		"test/e2e/alerts_test.go:TestAlertsFireOnTheManagersMetrics",
	},
}

// TestCapabilityClaimHasEvidence: the CSV claims no level above the highest one whose
// evidence (and every lower level's) exists, and docs/OLM.md says the same level.
func TestCapabilityClaimHasEvidence(t *testing.T) {
	csv := loadBundle(t).CSV
	claimed := csv.Annotations["capabilities"]
	level := slices.Index(capabilityLevels, claimed)
	require.GreaterOrEqual(t, level, 0, "the CSV's capabilities annotation %q is not an OperatorHub level", claimed)
	assert.True(t, strings.Contains(string(read(t, "config", "manifests", "bases", "quartet.clusterserviceversion.yaml")), "capabilities: "+claimed),
		"config/manifests/bases claims another level than bundle/ (%s): run make bundle", claimed)

	for _, l := range capabilityLevels[:level+1] {
		require.NotEmpty(t, capabilityEvidence[l], "the CSV claims %s, which includes %s: no test shows it", claimed, l)
		for _, e := range capabilityEvidence[l] {
			file, fn, ok := strings.Cut(e, ":")
			require.True(t, ok, e)
			src, err := os.ReadFile(repoPath(t, file))
			require.NoError(t, err, "%s: evidence for %s", file, l)
			assert.Regexp(t, regexp.MustCompile(`(?m)^func `+fn+`\(t \*testing\.T\) \{`), string(src), "%s: evidence for %s", e, l)
		}
	}
	if level >= slices.Index(capabilityLevels, "Deep Insights") {
		rules, err := alerts.ReadRules(repoPath(t))
		require.NoError(t, err)
		assert.NotEmpty(t, rules.Alerts(), "Deep Insights without alerting rules")
		// The bundle cannot carry the ServiceMonitor and the alerts (TestBundleCSVContract/
		// monitoring): the CSV's description must say exactly what the admin adds.
		assert.Contains(t, csv.Spec.Description, "kubectl apply -n <namespace> -k config/prometheus", "Deep Insights: the description does not say how to add the alerts")
		assert.Contains(t, csv.Spec.Description, "quartet-metrics-reader", "Deep Insights: the description does not say how Prometheus may read the metrics")
	}
	assert.True(t, strings.Contains(string(read(t, "docs", "OLM.md")), "The CSV claims capability level **"+claimed+"**"),
		"docs/OLM.md does not say the CSV claims %s", claimed)
}
