// Package crdvalidation proves the four CRDs are a contract the API server enforces: every
// sample applies, and bad input is refused with a message that names the field.
package crdvalidation

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/quartet-operator/quartet/internal/localcluster"
	"github.com/quartet-operator/quartet/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.RunSuite(m, testenv.Envtest, &env)) }

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
	return u
}

// TestSamplesApply creates every object in config/samples, unchanged, and reads it back.
func TestSamplesApply(t *testing.T) {
	env.Require(t)
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	files, err := filepath.Glob(filepath.Join(root, "config", "samples", "*_*.yaml"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), 5, "samples for every kind and both ChaosAgent versions")
	ctx := context.Background()
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			u := &unstructured.Unstructured{}
			require.NoError(t, utilyaml.Unmarshal(raw, &u.Object))
			if u.GetNamespace() == "" && u.GetKind() != "ChaosAgent" {
				u.SetNamespace("default")
			}
			// Both edmund samples share a name, as in the original operator's examples: start
			// each from scratch.
			_ = env.Client.Delete(ctx, u.DeepCopy())
			require.NoError(t, eventuallyCreate(ctx, u), "sample %s must be accepted", f)
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(u), got))
			gotSpec := got.Object["spec"].(map[string]any)
			for k, v := range u.Object["spec"].(map[string]any) {
				assert.EqualValues(t, v, gotSpec[k], "spec.%s kept as written", k)
			}
			require.NoError(t, env.Client.Delete(ctx, got))
		})
	}
}

// eventuallyCreate retries while a previous object of the same name is still going away.
func eventuallyCreate(ctx context.Context, u *unstructured.Unstructured) error {
	var err error
	for i := 0; i < 50; i++ {
		err = env.Client.Create(ctx, u.DeepCopy())
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		_ = env.Client.Delete(ctx, u.DeepCopy())
		select {
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
	}
	return err
}

// TestV1alpha1StoredAsV1beta1 checks the original operator's v1alpha1 agent survives as v1beta1 with
// the v1beta1 defaults, and is still readable as v1alpha1.
func TestV1alpha1StoredAsV1beta1(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	u := decode(t, `
apiVersion: blackadder.io/v1alpha1
kind: ChaosAgent
metadata: {name: alpha-agent}
spec: {tantrumMode: true, podTolerance: 7}`)
	require.NoError(t, env.Client.Create(ctx, u))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, u) })

	beta := &unstructured.Unstructured{}
	beta.SetAPIVersion("blackadder.io/v1beta1")
	beta.SetKind("ChaosAgent")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "alpha-agent"}, beta))
	spec := beta.Object["spec"].(map[string]any)
	assert.Equal(t, true, spec["tantrumMode"])
	assert.EqualValues(t, 7, spec["podTolerance"])
	assert.EqualValues(t, 20, spec["eagerness"], "v1beta1 default applied")
	assert.EqualValues(t, 30, spec["pauseDuration"], "v1beta1 default applied")

	alpha := &unstructured.Unstructured{}
	alpha.SetAPIVersion("blackadder.io/v1alpha1")
	alpha.SetKind("ChaosAgent")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "alpha-agent"}, alpha))
	assert.EqualValues(t, 7, alpha.Object["spec"].(map[string]any)["podTolerance"])
}

// invalid is one object the API server must refuse, and the words its message must hold.
type invalid struct {
	name     string
	doc      string
	wantMsgs []string
	// update, when set, is created first; doc is then applied as an update of it.
	update string
}

var invalidObjects = []invalid{
	// ChaosAgent
	{name: "eagerness above 100 (the original operator's example)", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {tantrumMode: true, podTolerance: 10, eagerness: 200}`, wantMsgs: []string{"spec.eagerness", "less than or equal to 100"}},
	{name: "eagerness zero", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {eagerness: 0}`, wantMsgs: []string{"spec.eagerness", "greater than or equal to 1"}},
	{name: "negative pod tolerance", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {podTolerance: -1}`, wantMsgs: []string{"spec.podTolerance", "greater than or equal to 0"}},
	{name: "negative pod tolerance in v1alpha1", doc: `
apiVersion: blackadder.io/v1alpha1
kind: ChaosAgent
metadata: {name: bad}
spec: {tantrumMode: true, podTolerance: -5}`, wantMsgs: []string{"spec.podTolerance"}},
	{name: "pause of zero seconds", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {pauseDuration: 0}`, wantMsgs: []string{"spec.pauseDuration", "greater than or equal to 1"}},
	{name: "tantrumMode not a boolean", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {tantrumMode: "sometimes"}`, wantMsgs: []string{"spec.tantrumMode", "boolean"}},
	{name: "excluded namespace not a DNS label", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {excludedNamespaces: ["Kube_System"]}`, wantMsgs: []string{"spec.excludedNamespaces[0]", "should match"}},
	{name: "unknown kill method", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {killMethod: Nuke}`, wantMsgs: []string{"spec.killMethod", "Evict", "Delete"}},
	{name: "max actions per round zero", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {maxActionsPerRound: 0}`, wantMsgs: []string{"spec.maxActionsPerRound"}},
	{name: "duplicate excluded namespaces", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {excludedNamespaces: [a, a]}`, wantMsgs: []string{"spec.excludedNamespaces[1]", "Duplicate"}},
	{name: "time zone not an IANA name", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {timeZone: Mars/Olympus_Mons}}`, wantMsgs: []string{"spec.schedule.timeZone", "IANA time zone name"}},
	{name: "time zone an offset", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {timeZone: "+02:00"}}`, wantMsgs: []string{"spec.schedule.timeZone", "IANA time zone name"}},
	{name: "time zone Local (the manager's own)", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {timeZone: Local}}`, wantMsgs: []string{"spec.schedule.timeZone", "IANA time zone name"}},
	{name: "window start not HH:MM", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {windows: [{start: "9:00", end: "17:00"}]}}`, wantMsgs: []string{"spec.schedule.windows[0].start", "should match"}},
	{name: "window start 24:00", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {windows: [{start: "24:00", end: "06:00"}]}}`, wantMsgs: []string{"spec.schedule.windows[0].start", "should match"}},
	{name: "window without end", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {windows: [{start: "09:00"}]}}`, wantMsgs: []string{"spec.schedule.windows[0].end", "Required"}},
	{name: "window of no length", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {windows: [{start: "09:00", end: "09:00"}]}}`, wantMsgs: []string{"spec.schedule.windows[0]", "start and end must differ"}},
	{name: "window on an unknown day", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {windows: [{days: [Monday], start: "09:00", end: "17:00"}]}}`, wantMsgs: []string{"spec.schedule.windows[0].days[0]", "Mon"}},
	{name: "excluded date not YYYY-MM-DD", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {excludedDates: ["24.12.2026"]}}`, wantMsgs: []string{"spec.schedule.excludedDates[0]", "should match"}},
	{name: "excluded date that does not exist", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {schedule: {excludedDates: ["2026-02-30"]}}`, wantMsgs: []string{"spec.schedule.excludedDates[0]", "must be a date that exists"}},
	{name: "duration of zero seconds", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {durationSeconds: 0}`, wantMsgs: []string{"spec.durationSeconds", "greater than or equal to 1"}},
	{name: "duration as a Go duration string", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {durationSeconds: "1h"}`, wantMsgs: []string{"spec.durationSeconds", "integer"}},
	{name: "mean time between kills of zero", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {tantrumMode: true, meanSecondsBetweenKills: 0}`, wantMsgs: []string{"spec.meanSecondsBetweenKills", "greater than or equal to 1"}},
	{name: "run name too long", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {runName: "` + strings.Repeat("r", 64) + `"}`, wantMsgs: []string{"spec.runName", "63"}},
	{name: "guard with neither check", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web}]}`, wantMsgs: []string{"spec.guards[0]", "exactly one of deployment and http"}},
	{name: "guard with both checks", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, deployment: {namespace: shop, name: web, minReady: 1}, http: {url: "http://web.shop.svc"}}]}`,
		wantMsgs: []string{"spec.guards[0]", "exactly one of deployment and http"}},
	{name: "two guards of one name", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, http: {url: "http://a.b"}}, {name: web, http: {url: "http://c.d"}}]}`, wantMsgs: []string{"spec.guards[1]", "Duplicate"}},
	{name: "guard floor of zero", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, deployment: {namespace: shop, name: web, minReady: 0}}]}`, wantMsgs: []string{"spec.guards[0].deployment.minReady", "at least 1 or a percentage"}},
	{name: "guard floor above 100%", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, deployment: {namespace: shop, name: web, minReady: "150%"}}]}`, wantMsgs: []string{"spec.guards[0].deployment.minReady", "at least 1 or a percentage"}},
	{name: "guard floor not a number", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, deployment: {namespace: shop, name: web, minReady: "most"}}]}`, wantMsgs: []string{"spec.guards[0].deployment.minReady", "at least 1 or a percentage"}},
	{name: "guard without a namespace", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, deployment: {name: web, minReady: 1}}]}`, wantMsgs: []string{"spec.guards[0].deployment.namespace", "Required"}},
	{name: "guard URL not http", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, http: {url: "file:///etc/passwd"}}]}`, wantMsgs: []string{"spec.guards[0].http.url", "absolute http or https URL"}},
	{name: "guard URL relative", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, http: {url: "/healthz"}}]}`, wantMsgs: []string{"spec.guards[0].http.url", "absolute http or https URL"}},
	{name: "guard URL with credentials", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, http: {url: "https://user:secret@web.shop.svc/healthz"}}]}`, wantMsgs: []string{"spec.guards[0].http.url", "must not carry credentials"}},
	{name: "guard expecting status 42", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, http: {url: "http://web.shop.svc", expectedStatus: 42}}]}`, wantMsgs: []string{"spec.guards[0].http.expectedStatus", "greater than or equal to 100"}},
	{name: "guard timeout above 30 seconds", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: web, http: {url: "http://web.shop.svc", timeoutSeconds: 60}}]}`, wantMsgs: []string{"spec.guards[0].http.timeoutSeconds", "less than or equal to 30"}},
	{name: "guard name not a DNS label", doc: `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: bad}
spec: {guards: [{name: Web_Up, http: {url: "http://web.shop.svc"}}]}`, wantMsgs: []string{"spec.guards[0].name", "should match"}},
	{name: "a guard in v1alpha1 is checked too", doc: `
apiVersion: blackadder.io/v1alpha1
kind: ChaosAgent
metadata: {name: bad}
spec: {tantrumMode: true, guards: [{name: web}]}`, wantMsgs: []string{"spec.guards[0]", "exactly one of deployment and http"}},
	// CopyratorRule
	{name: "unknown rule type", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: pod, selector: {copyrator: "true"}}`, wantMsgs: []string{"spec.ruleType", "configmap", "secret"}},
	{name: "rule type missing", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {selector: {copyrator: "true"}}`, wantMsgs: []string{"spec.ruleType", "Required"}},
	{name: "empty selector would copy everything", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, selector: {}}`, wantMsgs: []string{"spec.selector", "at least 1"}},
	{name: "selector as a string (the original operator's CRD)", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: configmap, selector: "copyrator=true"}`, wantMsgs: []string{"spec.selector", "object"}},
	{name: "selector value not a label value", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: configmap, selector: {copyrator: "not a label value"}}`, wantMsgs: []string{"spec.selector.copyrator", "should match"}},
	{name: "selector key not a label key", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: configmap, selector: {"bad key!": "x"}}`, wantMsgs: []string{"spec.selector", "valid label keys"}},
	{name: "namespaces and namespaceSelector together", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: configmap, selector: {a: b}, namespaces: [x], namespaceSelector: {matchLabels: {team: a}}}`, wantMsgs: []string{"spec", "mutually exclusive"}},
	{name: "unknown deletion policy", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: configmap, selector: {a: b}, deletionPolicy: Orphan}`, wantMsgs: []string{"spec.deletionPolicy", "Delete", "Retain"}},
	{name: "target namespace not a DNS label", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: configmap, selector: {a: b}, namespaces: ["Team_A"]}`, wantMsgs: []string{"spec.namespaces[0]"}},
	{name: "service account name not a DNS subdomain", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: configmap, selector: {a: b}, serviceAccountName: "system:serviceaccount:kube-system:admin"}`, wantMsgs: []string{"spec.serviceAccountName", "should match"}},
	{name: "neither selector nor sourceNames", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret}`, wantMsgs: []string{"spec", "exactly one of spec.selector and spec.sourceNames"}},
	{name: "selector and sourceNames together", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, selector: {a: b}, sourceNames: [tls]}`, wantMsgs: []string{"spec", "exactly one of spec.selector and spec.sourceNames"}},
	{name: "source name not an object name", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, sourceNames: ["Not/AName"]}`, wantMsgs: []string{"spec.sourceNames[0]", "should match"}},
	{name: "a key named twice", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, sourceNames: [tls], keys: [{key: tls.crt}, {key: tls.crt, targetKey: cert.pem}]}`, wantMsgs: []string{"spec.keys", "must not name a key twice"}},
	{name: "two keys copied to one name", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, sourceNames: [tls], keys: [{key: tls.crt}, {key: ca.crt, targetKey: tls.crt}]}`, wantMsgs: []string{"spec.keys", "same targetKey"}},
	{name: "a key that is no data key", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, sourceNames: [tls], keys: [{key: "a/b"}]}`, wantMsgs: []string{"spec.keys[0].key", "should match"}},
	{name: "carrying Copyrator's own label", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, selector: {a: b}, carryLabels: [team, copyrator.flant.com/rule]}`, wantMsgs: []string{"spec.carryLabels", "must not name Copyrator's own labels"}},
	{name: "carrying the managed-by label", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, selector: {a: b}, carryLabels: [app.kubernetes.io/managed-by]}`, wantMsgs: []string{"spec.carryLabels", "must not name Copyrator's own labels"}},
	{name: "carrying kubectl's last applied content", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, selector: {a: b}, carryAnnotations: [kubectl.kubernetes.io/last-applied-configuration]}`, wantMsgs: []string{"spec.carryAnnotations", "last-applied-configuration"}},
	{name: "carried label key not a label key", doc: `
apiVersion: flant.com/v1
kind: CopyratorRule
metadata: {name: bad, namespace: default}
spec: {ruleType: secret, selector: {a: b}, carryLabels: ["bad key!"]}`, wantMsgs: []string{"spec.carryLabels[0]", "should match"}},
	// ExchangeRate
	{name: "lower-case currency", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: usd}`, wantMsgs: []string{"spec.currency", "should match"}},
	{name: "currency too long", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USDT}`, wantMsgs: []string{"spec.currency"}},
	{name: "currency missing", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {base: USD}`, wantMsgs: []string{"spec", "exactly one of spec.currency and spec.currencies must be set"}},
	{name: "currency and currencies together", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, currencies: [GBP]}`, wantMsgs: []string{"spec", "exactly one of spec.currency and spec.currencies must be set"}},
	{name: "currencies holding the base", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currencies: [USD, EUR]}`, wantMsgs: []string{"spec", "spec.currencies must not contain spec.base"}},
	{name: "a currency twice", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currencies: [USD, GBP, USD]}`, wantMsgs: []string{"spec.currencies[2]", "Duplicate"}},
	{name: "lower-case currency in currencies", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currencies: [USD, gbp]}`, wantMsgs: []string{"spec.currencies[1]", "should match"}},
	{name: "no currencies", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currencies: []}`, wantMsgs: []string{"spec.currencies", "at least 1 items"}},
	{name: "unknown source type", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, sources: [{type: oanda}]}`, wantMsgs: []string{"spec.sources[0].type", "Unsupported value", "frankfurter-v2"}},
	{name: "source without a type", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, sources: [{provider: ECB}]}`, wantMsgs: []string{"spec.sources[0].type", "Required"}},
	{name: "provider of the ECB", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, sources: [{type: ecb, provider: ECB}]}`, wantMsgs: []string{"spec.sources[0]", "spec.sources[].provider is only for type frankfurter-v2"}},
	{name: "provider not a provider key", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, sources: [{type: frankfurter-v2, provider: "ecb&base=USD"}]}`, wantMsgs: []string{"spec.sources[0].provider", "should match"}},
	{name: "a source twice", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, sources: [{type: frankfurter-v2, provider: ECB}, {type: ecb}, {type: frankfurter-v2, provider: ECB}]}`,
		wantMsgs: []string{"spec.sources", "spec.sources must not name a source twice"}},
	{name: "five sources", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, sources: [{type: ecb}, {type: frankfurter}, {type: frankfurter-v2}, {type: frankfurter-v2, provider: ECB},
  {type: frankfurter-v2, provider: BOC}]}`, wantMsgs: []string{"spec.sources", "at most 4 items"}},
	{name: "no sources", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, sources: []}`, wantMsgs: []string{"spec.sources", "at least 1 items"}},
	{name: "tolerance without percent sign", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, divergenceTolerance: "1"}`, wantMsgs: []string{"spec.divergenceTolerance", "should match"}},
	{name: "tolerance above 100%", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, divergenceTolerance: "150%"}`, wantMsgs: []string{"spec.divergenceTolerance", "should match"}},
	{name: "tolerance with four decimals", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, divergenceTolerance: "0.0001%"}`, wantMsgs: []string{"spec.divergenceTolerance", "should match"}},
	{name: "currency equal to base", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: EUR}`, wantMsgs: []string{"spec", "spec.currency must differ from spec.base"}},
	{name: "refresh interval too short", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, refreshInterval: 10s}`, wantMsgs: []string{"spec.refreshInterval", "at least 1m"}},
	{name: "refresh interval not a duration", doc: `
apiVersion: operators.brennerm.github.io/v1
kind: ExchangeRate
metadata: {name: bad, namespace: default}
spec: {currency: USD, refreshInterval: hourly}`, wantMsgs: []string{"spec.refreshInterval", "should match"}},
	// RegistryMirror
	{name: "upstream missing", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {storage: 10Gi}`, wantMsgs: []string{"spec.upstream", "Required"}},
	{name: "upstream without scheme", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: registry-1.docker.io}`, wantMsgs: []string{"spec.upstream"}},
	{name: "upstream with a path", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io/some/path"}`, wantMsgs: []string{"spec.upstream", "should match"}},
	{name: "upstream carrying a password", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: m, namespace: default}
spec: {upstream: "https://puller:s3cret@registry.example"}`, wantMsgs: []string{"spec.upstream", "credentialsSecretRef"}},
	{name: "upstream _default (containerd's catch-all)", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://_default"}`, wantMsgs: []string{"spec.upstream", "DNS name or an IP address"}},
	{name: "upstream host not a DNS name", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://registry_mirror.example"}`, wantMsgs: []string{"spec.upstream", "DNS name or an IP address"}},
	// RegistryHostGrant
	{name: "grant of _default", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryHostGrant
metadata: {name: bad}
spec: {host: _default, mirror: {namespace: m, name: hub}}`, wantMsgs: []string{"spec.host", "should match"}},
	{name: "grant of a host with a scheme", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryHostGrant
metadata: {name: bad}
spec: {host: "https://docker.io", mirror: {namespace: m, name: hub}}`, wantMsgs: []string{"spec.host", "should match"}},
	{name: "grant without a mirror", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryHostGrant
metadata: {name: bad}
spec: {host: docker.io}`, wantMsgs: []string{"spec.mirror", "Required"}},
	{name: "grant of resolve without pull", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryHostGrant
metadata: {name: bad}
spec: {host: docker.io, mirror: {namespace: m, name: hub}, capabilities: [resolve]}`, wantMsgs: []string{"spec.capabilities", "must include pull"}},
	{name: "grant of an unknown capability", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryHostGrant
metadata: {name: bad}
spec: {host: docker.io, mirror: {namespace: m, name: hub}, capabilities: [pull, push]}`, wantMsgs: []string{"spec.capabilities", "Unsupported value"}},
	{name: "storage not a quantity", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", storage: lots}`, wantMsgs: []string{"spec.storage"}},
	{name: "storage zero", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", storage: "0"}`, wantMsgs: []string{"spec.storage", "greater than zero"}},
	{name: "cache TTL not a duration", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", cacheTTL: "a week"}`, wantMsgs: []string{"spec.cacheTTL"}},
	{name: "retention under 1h", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", retention: 30m}`, wantMsgs: []string{"spec.retention", "at least 1h"}},
	{name: "retention over 10 years", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", retention: 87601h}`, wantMsgs: []string{"spec.retention", "at most 87600h"}},
	{name: "retention not a duration", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", retention: "30 days"}`, wantMsgs: []string{"spec.retention", "should match"}},
	{name: "disk percent 100", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", maxDiskPercent: 100}`, wantMsgs: []string{"spec.maxDiskPercent", "less than or equal to 99"}},
	{name: "disk percent negative", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", maxDiskPercent: -1}`, wantMsgs: []string{"spec.maxDiskPercent", "greater than or equal to 0"}},
	{name: "warm platform without an architecture", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", warmPlatforms: [linux]}`, wantMsgs: []string{"spec.warmPlatforms[0]", "should match"}},
	{name: "warm platform listed twice", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", warmPlatforms: [linux/amd64, linux/amd64]}`, wantMsgs: []string{"spec.warmPlatforms[1]", "Duplicate value"}},
	{name: "no replicas", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", replicas: 0}`, wantMsgs: []string{"spec.replicas", "greater than or equal to 1"}},
	{name: "too many replicas", doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: bad, namespace: default}
spec: {upstream: "https://quay.io", replicas: 6}`, wantMsgs: []string{"spec.replicas", "less than or equal to 5"}},
	{name: "storage shrunk", update: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: shrink, namespace: default}
spec: {upstream: "https://quay.io", storage: 20Gi}`, doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: shrink, namespace: default}
spec: {upstream: "https://quay.io", storage: 5Gi}`, wantMsgs: []string{"spec.storage", "may grow but not shrink"}},
	{name: "storage class changed", update: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: sc, namespace: default}
spec: {upstream: "https://quay.io", storageClassName: fast}`, doc: `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: sc, namespace: default}
spec: {upstream: "https://quay.io", storageClassName: slow}`, wantMsgs: []string{"spec", "spec.storageClassName is immutable"}},
}

// TestRegistryMirrorRetentionDefaults: a mirror as Quartet 0.2.0's users wrote it, with the
// now deprecated cacheTTL, is still accepted and gets the retention and disk bound defaults;
// the limits themselves are accepted.
func TestRegistryMirrorRetentionDefaults(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, spec         string
		wantRetention      string
		wantMaxDiskPercent int64
		wantCacheTTL       any
		wantReplicas       int64
	}{
		{"0.2.0 object with cacheTTL", `{upstream: "https://quay.io", cacheTTL: 168h}`, "720h", 85, "168h", 1},
		{"nothing set", `{upstream: "https://quay.io"}`, "720h", 85, nil, 1},
		{"the lowest", `{upstream: "https://quay.io", retention: 1h, maxDiskPercent: 0}`, "1h", 0, nil, 1},
		{"the highest", `{upstream: "https://quay.io", retention: 87600h, maxDiskPercent: 99, replicas: 5}`, "87600h", 99, nil, 5},
		{"a Go duration", `{upstream: "https://quay.io", retention: 2160h0m0s}`, "2160h0m0s", 85, nil, 1},
		{"warmed for three platforms", `{upstream: "https://quay.io", warmPlatforms: [linux/amd64, linux/arm64, linux/arm/v7]}`, "720h", 85, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := decode(t, `
apiVersion: mirrors.quartet.dev/v1alpha1
kind: RegistryMirror
metadata: {name: retention, namespace: default}
spec: `+tc.spec)
			require.NoError(t, eventuallyCreate(ctx, u))
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(u.GroupVersionKind())
			require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(u), got))
			t.Cleanup(func() { _ = env.Client.Delete(ctx, got) })
			spec := got.Object["spec"].(map[string]any)
			assert.Equal(t, tc.wantRetention, spec["retention"])
			assert.EqualValues(t, tc.wantMaxDiskPercent, spec["maxDiskPercent"])
			assert.Equal(t, tc.wantCacheTTL, spec["cacheTTL"], "cacheTTL is kept as written")
			assert.EqualValues(t, tc.wantReplicas, spec["replicas"], "one registry unless more are asked for")
			require.NoError(t, env.Client.Delete(ctx, got))
		})
	}
}

// TestInvalidObjectsRefused applies each invalid object and checks the API server refuses
// it with an Invalid error whose message names the field.
func TestInvalidObjectsRefused(t *testing.T) {
	env.Require(t)
	require.GreaterOrEqual(t, len(invalidObjects), 25)
	ctx := context.Background()
	for _, tc := range invalidObjects {
		t.Run(tc.name, func(t *testing.T) {
			obj := decode(t, tc.doc)
			var err error
			if tc.update != "" {
				orig := decode(t, tc.update)
				require.NoError(t, env.Client.Create(ctx, orig), "the starting object must be valid")
				t.Cleanup(func() { _ = env.Client.Delete(ctx, orig) })
				obj.SetResourceVersion(orig.GetResourceVersion())
				err = env.Client.Update(ctx, obj)
			} else {
				err = env.Client.Create(ctx, obj)
				if err == nil {
					_ = env.Client.Delete(ctx, obj)
				}
			}
			require.Error(t, err, "the API server accepted an invalid object")
			assert.True(t, apierrors.IsInvalid(err) || apierrors.IsBadRequest(err), "want Invalid, got %v", err)
			for _, want := range tc.wantMsgs {
				assert.Contains(t, err.Error(), want)
			}
			t.Logf("refused: %s", strings.TrimSpace(err.Error()))
		})
	}
}

// TestV1alpha1WritesKeepV1beta1Fields: a change made through v1alpha1 (what `kubectl apply`
// of the original operator's v1alpha1 manifest does to an existing agent) must not drop the v1beta1
// fields — above all dryRun, whose loss would turn a rehearsal into real chaos.
func TestV1alpha1WritesKeepV1beta1Fields(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	beta := decode(t, `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: both-versions}
spec: {tantrumMode: true, podTolerance: 5, eagerness: 77, ipsumMode: true, dryRun: true}`)
	require.NoError(t, env.Client.Create(ctx, beta))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, beta) })

	alpha := &unstructured.Unstructured{}
	alpha.SetAPIVersion("blackadder.io/v1alpha1")
	alpha.SetKind("ChaosAgent")
	alpha.SetName("both-versions")
	require.NoError(t, env.Client.Patch(ctx, alpha, client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"tantrumMode":true,"podTolerance":6}}`))))

	got := &unstructured.Unstructured{}
	got.SetAPIVersion("blackadder.io/v1beta1")
	got.SetKind("ChaosAgent")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "both-versions"}, got))
	spec := got.Object["spec"].(map[string]any)
	assert.EqualValues(t, 6, spec["podTolerance"], "the v1alpha1 change applied")
	assert.EqualValues(t, 77, spec["eagerness"], "v1beta1 field kept")
	assert.Equal(t, true, spec["ipsumMode"], "v1beta1 field kept")
	assert.Equal(t, true, spec["dryRun"], "dryRun kept")
}

// TestChaosAgentScheduleGuardsRunsRoundTrip: an agent with every field of issue 25 (a
// schedule, a duration, guards of both kinds, a run name, per-workload pacing) is accepted
// with the guards' defaults filled in, reads the same through v1alpha1, and keeps all of it
// when the original operator's v1alpha1 manifest is applied over it.
func TestChaosAgentScheduleGuardsRunsRoundTrip(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	beta := decode(t, `
apiVersion: blackadder.io/v1beta1
kind: ChaosAgent
metadata: {name: guarded-agent}
spec:
  tantrumMode: true
  podTolerance: 5
  meanSecondsBetweenKills: 3600
  durationSeconds: 7200
  runName: "2026-11-26"
  schedule:
    timeZone: Europe/Berlin
    windows:
    - {days: [Mon, Tue, Wed, Thu, Fri], start: "09:00", end: "17:00"}
    - {days: [Fri], start: "22:00", end: "02:00"}
    - {start: "00:00", end: "24:00"}
    excludedDates: ["2026-12-24", "2026-12-25"]
  guards:
  - name: web-ready
    deployment: {namespace: shop, name: web, minReady: "75%"}
  - name: db-ready
    deployment: {namespace: shop, name: db, minReady: 2}
  - name: web-answers
    http: {url: "http://web.shop.svc:8080/healthz", maxLatencyMilliseconds: 500}`)
	require.NoError(t, env.Client.Create(ctx, beta))
	t.Cleanup(func() { _ = env.Client.Delete(ctx, beta) })

	read := func(version string) map[string]any {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("blackadder.io/" + version)
		u.SetKind("ChaosAgent")
		require.NoError(t, env.Client.Get(ctx, client.ObjectKey{Name: "guarded-agent"}, u))
		return u.Object["spec"].(map[string]any)
	}
	spec := read("v1beta1")
	guards := spec["guards"].([]any)
	require.Len(t, guards, 3)
	http := guards[2].(map[string]any)["http"].(map[string]any)
	assert.EqualValues(t, 200, http["expectedStatus"], "default expectedStatus")
	assert.EqualValues(t, 5, http["timeoutSeconds"], "default timeoutSeconds")
	assert.Equal(t, "75%", guards[0].(map[string]any)["deployment"].(map[string]any)["minReady"])
	assert.EqualValues(t, 2, guards[1].(map[string]any)["deployment"].(map[string]any)["minReady"])
	assert.Equal(t, spec, read("v1alpha1"), "v1alpha1 serves the same spec")

	alpha := &unstructured.Unstructured{}
	alpha.SetAPIVersion("blackadder.io/v1alpha1")
	alpha.SetKind("ChaosAgent")
	alpha.SetName("guarded-agent")
	require.NoError(t, env.Client.Patch(ctx, alpha, client.RawPatch("application/merge-patch+json",
		[]byte(`{"spec":{"tantrumMode":true,"podTolerance":10}}`))))
	after := read("v1beta1")
	assert.EqualValues(t, 10, after["podTolerance"], "the v1alpha1 change applied")
	delete(after, "podTolerance")
	delete(spec, "podTolerance")
	assert.Equal(t, spec, after, "every other field kept")
}

// TestChaosAgentVersionsServeOneSchema: the ChaosAgent CRD converts between v1alpha1 and
// v1beta1 without a webhook (strategy None), which is lossless only while both versions
// serve the same schema; a field added to one version alone would be pruned from objects
// written through the other. No API server needed.
func TestChaosAgentVersionsServeOneSchema(t *testing.T) {
	root, err := localcluster.RepoRoot()
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "config", "crd", "bases", "blackadder.io_chaosagents.yaml"))
	require.NoError(t, err)
	var crd struct {
		Spec struct {
			Conversion *struct {
				Strategy string `json:"strategy"`
			} `json:"conversion"`
			Versions []struct {
				Name    string         `json:"name"`
				Storage bool           `json:"storage"`
				Schema  map[string]any `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &crd))
	require.Len(t, crd.Spec.Versions, 2)
	if crd.Spec.Conversion != nil {
		assert.Equal(t, "None", crd.Spec.Conversion.Strategy)
	}
	schemas := map[string]map[string]any{}
	for _, v := range crd.Spec.Versions {
		schemas[v.Name] = v.Schema
		assert.Equal(t, v.Name == "v1beta1", v.Storage, "v1beta1 is stored")
		// The kinds' own descriptions differ (v1alpha1 says it is the article's); the rest
		// must not.
		delete(v.Schema["openAPIV3Schema"].(map[string]any), "description")
	}
	require.Contains(t, schemas, "v1alpha1")
	require.Contains(t, schemas, "v1beta1")
	assert.Equal(t, schemas["v1beta1"], schemas["v1alpha1"], "both versions serve one schema")
	spec := schemas["v1beta1"]["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
	for _, field := range []string{"schedule", "durationSeconds", "guards", "runName", "meanSecondsBetweenKills"} {
		assert.Contains(t, spec, field, "issue 25's fields are served")
	}
}
