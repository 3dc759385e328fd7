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

	"github.com/quartet-operator/quartet/test/localcluster"
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

// kind is the apiVersion and kind of the objects the tests write, and the rest of their
// metadata after the name (the namespace of namespaced kinds).
type kind struct{ apiVersion, kind, meta string }

var (
	agent  = kind{"blackadder.io/v1beta1", "ChaosAgent", ""}
	alpha  = kind{"blackadder.io/v1alpha1", "ChaosAgent", ""}
	rule   = kind{"flant.com/v1", "CopyratorRule", ", namespace: default"}
	rate   = kind{"operators.brennerm.github.io/v1", "ExchangeRate", ", namespace: default"}
	mirror = kind{"mirrors.quartet.dev/v1alpha1", "RegistryMirror", ", namespace: default"}
	grant  = kind{"mirrors.quartet.dev/v1alpha1", "RegistryHostGrant", ""}
)

// doc is the YAML document of the object name of kind k; spec is YAML (flow, or a block
// starting on a new line).
func (k kind) doc(name, spec string) string {
	return "apiVersion: " + k.apiVersion + "\nkind: " + k.kind + "\nmetadata: {name: " + name + k.meta + "}\nspec: " + spec
}

// create creates the object name of kind k and deletes it when the test ends.
func create(t *testing.T, k kind, name, spec string) {
	t.Helper()
	u := decode(t, k.doc(name, spec))
	require.NoError(t, env.Client.Create(context.Background(), u))
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), u) })
}

// agentSpec reads the ChaosAgent name through version and returns its spec.
func agentSpec(t *testing.T, version, name string) map[string]any {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("blackadder.io/" + version)
	u.SetKind("ChaosAgent")
	require.NoError(t, env.Client.Get(context.Background(), client.ObjectKey{Name: name}, u))
	return u.Object["spec"].(map[string]any)
}

// patchV1alpha1 merge-patches the ChaosAgent name through v1alpha1, as `kubectl apply` of the
// original operator's v1alpha1 manifest does.
func patchV1alpha1(t *testing.T, name, patch string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("blackadder.io/v1alpha1")
	u.SetKind("ChaosAgent")
	u.SetName(name)
	require.NoError(t, env.Client.Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", []byte(patch))))
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
	create(t, alpha, "alpha-agent", `{tantrumMode: true, podTolerance: 7}`)
	spec := agentSpec(t, "v1beta1", "alpha-agent")
	assert.Equal(t, true, spec["tantrumMode"])
	assert.EqualValues(t, 7, spec["podTolerance"])
	assert.EqualValues(t, 20, spec["eagerness"], "v1beta1 default applied")
	assert.EqualValues(t, 30, spec["pauseDuration"], "v1beta1 default applied")
	assert.EqualValues(t, 7, agentSpec(t, "v1alpha1", "alpha-agent")["podTolerance"])
}

// invalid is one object the API server must refuse, and the words its message must hold.
type invalid struct {
	name     string
	kind     kind
	obj      string // the object's name
	spec     string
	wantMsgs []string
	// from, when set, is the spec the object is created with first; spec is then applied
	// as an update of it.
	from string
}

// bad is the case name: an object "bad" of kind k with spec is refused with wantMsgs.
func bad(name string, k kind, spec string, wantMsgs ...string) invalid {
	return invalid{name: name, kind: k, obj: "bad", spec: spec, wantMsgs: wantMsgs}
}

var invalidObjects = []invalid{
	// ChaosAgent
	bad("eagerness above 100 (the original operator's example)", agent, `{tantrumMode: true, podTolerance: 10, eagerness: 200}`,
		"spec.eagerness", "less than or equal to 100"),
	bad("eagerness zero", agent, `{eagerness: 0}`, "spec.eagerness", "greater than or equal to 1"),
	bad("negative pod tolerance", agent, `{podTolerance: -1}`, "spec.podTolerance", "greater than or equal to 0"),
	bad("negative pod tolerance in v1alpha1", alpha, `{tantrumMode: true, podTolerance: -5}`, "spec.podTolerance"),
	bad("pause of zero seconds", agent, `{pauseDuration: 0}`, "spec.pauseDuration", "greater than or equal to 1"),
	bad("tantrumMode not a boolean", agent, `{tantrumMode: "sometimes"}`, "spec.tantrumMode", "boolean"),
	bad("excluded namespace not a DNS label", agent, `{excludedNamespaces: ["Kube_System"]}`, "spec.excludedNamespaces[0]", "should match"),
	bad("unknown kill method", agent, `{killMethod: Nuke}`, "spec.killMethod", "Evict", "Delete"),
	bad("max actions per round zero", agent, `{maxActionsPerRound: 0}`, "spec.maxActionsPerRound"),
	bad("duplicate excluded namespaces", agent, `{excludedNamespaces: [a, a]}`, "spec.excludedNamespaces[1]", "Duplicate"),
	bad("time zone not an IANA name", agent, `{schedule: {timeZone: Mars/Olympus_Mons}}`, "spec.schedule.timeZone", "IANA time zone name"),
	bad("time zone an offset", agent, `{schedule: {timeZone: "+02:00"}}`, "spec.schedule.timeZone", "IANA time zone name"),
	bad("time zone Local (the manager's own)", agent, `{schedule: {timeZone: Local}}`, "spec.schedule.timeZone", "IANA time zone name"),
	bad("window start not HH:MM", agent, `{schedule: {windows: [{start: "9:00", end: "17:00"}]}}`, "spec.schedule.windows[0].start", "should match"),
	bad("window start 24:00", agent, `{schedule: {windows: [{start: "24:00", end: "06:00"}]}}`, "spec.schedule.windows[0].start", "should match"),
	bad("window without end", agent, `{schedule: {windows: [{start: "09:00"}]}}`, "spec.schedule.windows[0].end", "Required"),
	bad("window of no length", agent, `{schedule: {windows: [{start: "09:00", end: "09:00"}]}}`, "spec.schedule.windows[0]", "start and end must differ"),
	bad("window on an unknown day", agent, `{schedule: {windows: [{days: [Monday], start: "09:00", end: "17:00"}]}}`, "spec.schedule.windows[0].days[0]", "Mon"),
	bad("excluded date not YYYY-MM-DD", agent, `{schedule: {excludedDates: ["24.12.2026"]}}`, "spec.schedule.excludedDates[0]", "should match"),
	bad("excluded date that does not exist", agent, `{schedule: {excludedDates: ["2026-02-30"]}}`, "spec.schedule.excludedDates[0]", "must be a date that exists"),
	bad("duration of zero seconds", agent, `{durationSeconds: 0}`, "spec.durationSeconds", "greater than or equal to 1"),
	bad("duration as a Go duration string", agent, `{durationSeconds: "1h"}`, "spec.durationSeconds", "integer"),
	bad("mean time between kills of zero", agent, `{tantrumMode: true, meanSecondsBetweenKills: 0}`, "spec.meanSecondsBetweenKills", "greater than or equal to 1"),
	bad("run name too long", agent, `{runName: "`+strings.Repeat("r", 64)+`"}`, "spec.runName", "63"),
	bad("guard with neither check", agent, `{guards: [{name: web}]}`, "spec.guards[0]", "exactly one of deployment and http"),
	bad("guard with both checks", agent, `{guards: [{name: web, deployment: {namespace: shop, name: web, minReady: 1}, http: {url: "http://web.shop.svc"}}]}`,
		"spec.guards[0]", "exactly one of deployment and http"),
	bad("two guards of one name", agent, `{guards: [{name: web, http: {url: "http://a.b"}}, {name: web, http: {url: "http://c.d"}}]}`, "spec.guards[1]", "Duplicate"),
	bad("guard floor of zero", agent, `{guards: [{name: web, deployment: {namespace: shop, name: web, minReady: 0}}]}`,
		"spec.guards[0].deployment.minReady", "at least 1 or a percentage"),
	bad("guard floor above 100%", agent, `{guards: [{name: web, deployment: {namespace: shop, name: web, minReady: "150%"}}]}`,
		"spec.guards[0].deployment.minReady", "at least 1 or a percentage"),
	bad("guard floor not a number", agent, `{guards: [{name: web, deployment: {namespace: shop, name: web, minReady: "most"}}]}`,
		"spec.guards[0].deployment.minReady", "at least 1 or a percentage"),
	bad("guard without a namespace", agent, `{guards: [{name: web, deployment: {name: web, minReady: 1}}]}`, "spec.guards[0].deployment.namespace", "Required"),
	bad("guard URL not http", agent, `{guards: [{name: web, http: {url: "file:///etc/passwd"}}]}`, "spec.guards[0].http.url", "absolute http or https URL"),
	bad("guard URL relative", agent, `{guards: [{name: web, http: {url: "/healthz"}}]}`, "spec.guards[0].http.url", "absolute http or https URL"),
	bad("guard URL with credentials", agent, `{guards: [{name: web, http: {url: "https://user:secret@web.shop.svc/healthz"}}]}`,
		"spec.guards[0].http.url", "must not carry credentials"),
	bad("guard expecting status 42", agent, `{guards: [{name: web, http: {url: "http://web.shop.svc", expectedStatus: 42}}]}`,
		"spec.guards[0].http.expectedStatus", "greater than or equal to 100"),
	bad("guard timeout above 30 seconds", agent, `{guards: [{name: web, http: {url: "http://web.shop.svc", timeoutSeconds: 60}}]}`,
		"spec.guards[0].http.timeoutSeconds", "less than or equal to 30"),
	bad("guard name not a DNS label", agent, `{guards: [{name: Web_Up, http: {url: "http://web.shop.svc"}}]}`, "spec.guards[0].name", "should match"),
	bad("a guard in v1alpha1 is checked too", alpha, `{tantrumMode: true, guards: [{name: web}]}`, "spec.guards[0]", "exactly one of deployment and http"),
	// CopyratorRule
	bad("unknown rule type", rule, `{ruleType: pod, selector: {copyrator: "true"}}`, "spec.ruleType", "configmap", "secret"),
	bad("rule type missing", rule, `{selector: {copyrator: "true"}}`, "spec.ruleType", "Required"),
	bad("empty selector would copy everything", rule, `{ruleType: secret, selector: {}}`, "spec.selector", "at least 1"),
	bad("selector as a string (the original operator's CRD)", rule, `{ruleType: configmap, selector: "copyrator=true"}`, "spec.selector", "object"),
	bad("selector value not a label value", rule, `{ruleType: configmap, selector: {copyrator: "not a label value"}}`, "spec.selector.copyrator", "should match"),
	bad("selector key not a label key", rule, `{ruleType: configmap, selector: {"bad key!": "x"}}`, "spec.selector", "valid label keys"),
	bad("namespaces and namespaceSelector together", rule, `{ruleType: configmap, selector: {a: b}, namespaces: [x], namespaceSelector: {matchLabels: {team: a}}}`,
		"spec", "mutually exclusive"),
	bad("unknown deletion policy", rule, `{ruleType: configmap, selector: {a: b}, deletionPolicy: Orphan}`, "spec.deletionPolicy", "Delete", "Retain"),
	bad("target namespace not a DNS label", rule, `{ruleType: configmap, selector: {a: b}, namespaces: ["Team_A"]}`, "spec.namespaces[0]"),
	bad("service account name not a DNS subdomain", rule, `{ruleType: configmap, selector: {a: b}, serviceAccountName: "system:serviceaccount:kube-system:admin"}`,
		"spec.serviceAccountName", "should match"),
	bad("neither selector nor sourceNames", rule, `{ruleType: secret}`, "spec", "exactly one of spec.selector and spec.sourceNames"),
	bad("selector and sourceNames together", rule, `{ruleType: secret, selector: {a: b}, sourceNames: [tls]}`,
		"spec", "exactly one of spec.selector and spec.sourceNames"),
	bad("source name not an object name", rule, `{ruleType: secret, sourceNames: ["Not/AName"]}`, "spec.sourceNames[0]", "should match"),
	bad("a key named twice", rule, `{ruleType: secret, sourceNames: [tls], keys: [{key: tls.crt}, {key: tls.crt, targetKey: cert.pem}]}`,
		"spec.keys", "must not name a key twice"),
	bad("two keys copied to one name", rule, `{ruleType: secret, sourceNames: [tls], keys: [{key: tls.crt}, {key: ca.crt, targetKey: tls.crt}]}`,
		"spec.keys", "same targetKey"),
	bad("a key that is no data key", rule, `{ruleType: secret, sourceNames: [tls], keys: [{key: "a/b"}]}`, "spec.keys[0].key", "should match"),
	bad("carrying Copyrator's own label", rule, `{ruleType: secret, selector: {a: b}, carryLabels: [team, copyrator.flant.com/rule]}`,
		"spec.carryLabels", "must not name Copyrator's own labels"),
	bad("carrying the managed-by label", rule, `{ruleType: secret, selector: {a: b}, carryLabels: [app.kubernetes.io/managed-by]}`,
		"spec.carryLabels", "must not name Copyrator's own labels"),
	bad("carrying kubectl's last applied content", rule, `{ruleType: secret, selector: {a: b}, carryAnnotations: [kubectl.kubernetes.io/last-applied-configuration]}`,
		"spec.carryAnnotations", "last-applied-configuration"),
	bad("carried label key not a label key", rule, `{ruleType: secret, selector: {a: b}, carryLabels: ["bad key!"]}`, "spec.carryLabels[0]", "should match"),
	// ExchangeRate
	bad("lower-case currency", rate, `{currency: usd}`, "spec.currency", "should match"),
	bad("currency too long", rate, `{currency: USDT}`, "spec.currency"),
	bad("currency missing", rate, `{base: USD}`, "spec", "exactly one of spec.currency and spec.currencies must be set"),
	bad("currency and currencies together", rate, `{currency: USD, currencies: [GBP]}`, "spec", "exactly one of spec.currency and spec.currencies must be set"),
	bad("currencies holding the base", rate, `{currencies: [USD, EUR]}`, "spec", "spec.currencies must not contain spec.base"),
	bad("a currency twice", rate, `{currencies: [USD, GBP, USD]}`, "spec.currencies[2]", "Duplicate"),
	bad("lower-case currency in currencies", rate, `{currencies: [USD, gbp]}`, "spec.currencies[1]", "should match"),
	bad("no currencies", rate, `{currencies: []}`, "spec.currencies", "at least 1 items"),
	bad("unknown source type", rate, `{currency: USD, sources: [{type: oanda}]}`, "spec.sources[0].type", "Unsupported value", "frankfurter-v2"),
	bad("source without a type", rate, `{currency: USD, sources: [{provider: ECB}]}`, "spec.sources[0].type", "Required"),
	bad("provider of the ECB", rate, `{currency: USD, sources: [{type: ecb, provider: ECB}]}`,
		"spec.sources[0]", "spec.sources[].provider is only for type frankfurter-v2"),
	bad("provider not a provider key", rate, `{currency: USD, sources: [{type: frankfurter-v2, provider: "ecb&base=USD"}]}`, "spec.sources[0].provider", "should match"),
	bad("a source twice", rate, `{currency: USD, sources: [{type: frankfurter-v2, provider: ECB}, {type: ecb}, {type: frankfurter-v2, provider: ECB}]}`,
		"spec.sources", "spec.sources must not name a source twice"),
	bad("five sources", rate, `{currency: USD, sources: [{type: ecb}, {type: frankfurter}, {type: frankfurter-v2}, {type: frankfurter-v2, provider: ECB},
  {type: frankfurter-v2, provider: BOC}]}`, "spec.sources", "at most 4 items"),
	bad("no sources", rate, `{currency: USD, sources: []}`, "spec.sources", "at least 1 items"),
	bad("tolerance without percent sign", rate, `{currency: USD, divergenceTolerance: "1"}`, "spec.divergenceTolerance", "should match"),
	bad("tolerance above 100%", rate, `{currency: USD, divergenceTolerance: "150%"}`, "spec.divergenceTolerance", "should match"),
	bad("tolerance with four decimals", rate, `{currency: USD, divergenceTolerance: "0.0001%"}`, "spec.divergenceTolerance", "should match"),
	bad("currency equal to base", rate, `{currency: EUR}`, "spec", "spec.currency must differ from spec.base"),
	bad("refresh interval too short", rate, `{currency: USD, refreshInterval: 10s}`, "spec.refreshInterval", "at least 1m"),
	bad("refresh interval not a duration", rate, `{currency: USD, refreshInterval: hourly}`, "spec.refreshInterval", "should match"),
	// RegistryMirror
	bad("upstream missing", mirror, `{storage: 10Gi}`, "spec.upstream", "Required"),
	bad("upstream without scheme", mirror, `{upstream: registry-1.docker.io}`, "spec.upstream"),
	bad("upstream with a path", mirror, `{upstream: "https://quay.io/some/path"}`, "spec.upstream", "should match"),
	{name: "upstream carrying a password", kind: mirror, obj: "m", spec: `{upstream: "https://puller:s3cret@registry.example"}`,
		wantMsgs: []string{"spec.upstream", "credentialsSecretRef"}},
	bad("upstream _default (containerd's catch-all)", mirror, `{upstream: "https://_default"}`, "spec.upstream", "DNS name or an IP address"),
	bad("upstream host not a DNS name", mirror, `{upstream: "https://registry_mirror.example"}`, "spec.upstream", "DNS name or an IP address"),
	// RegistryHostGrant
	bad("grant of _default", grant, `{host: _default, mirror: {namespace: m, name: hub}}`, "spec.host", "should match"),
	bad("grant of a host with a scheme", grant, `{host: "https://docker.io", mirror: {namespace: m, name: hub}}`, "spec.host", "should match"),
	bad("grant without a mirror", grant, `{host: docker.io}`, "spec.mirror", "Required"),
	bad("grant of resolve without pull", grant, `{host: docker.io, mirror: {namespace: m, name: hub}, capabilities: [resolve]}`,
		"spec.capabilities", "must include pull"),
	bad("grant of an unknown capability", grant, `{host: docker.io, mirror: {namespace: m, name: hub}, capabilities: [pull, push]}`,
		"spec.capabilities", "Unsupported value"),
	bad("storage not a quantity", mirror, `{upstream: "https://quay.io", storage: lots}`, "spec.storage"),
	bad("storage zero", mirror, `{upstream: "https://quay.io", storage: "0"}`, "spec.storage", "greater than zero"),
	bad("cache TTL not a duration", mirror, `{upstream: "https://quay.io", cacheTTL: "a week"}`, "spec.cacheTTL"),
	bad("retention under 1h", mirror, `{upstream: "https://quay.io", retention: 30m}`, "spec.retention", "at least 1h"),
	bad("retention over 10 years", mirror, `{upstream: "https://quay.io", retention: 87601h}`, "spec.retention", "at most 87600h"),
	bad("retention not a duration", mirror, `{upstream: "https://quay.io", retention: "30 days"}`, "spec.retention", "should match"),
	bad("disk percent 100", mirror, `{upstream: "https://quay.io", maxDiskPercent: 100}`, "spec.maxDiskPercent", "less than or equal to 99"),
	bad("disk percent negative", mirror, `{upstream: "https://quay.io", maxDiskPercent: -1}`, "spec.maxDiskPercent", "greater than or equal to 0"),
	bad("warm platform without an architecture", mirror, `{upstream: "https://quay.io", warmPlatforms: [linux]}`, "spec.warmPlatforms[0]", "should match"),
	bad("warm platform listed twice", mirror, `{upstream: "https://quay.io", warmPlatforms: [linux/amd64, linux/amd64]}`, "spec.warmPlatforms[1]", "Duplicate value"),
	bad("no replicas", mirror, `{upstream: "https://quay.io", replicas: 0}`, "spec.replicas", "greater than or equal to 1"),
	bad("too many replicas", mirror, `{upstream: "https://quay.io", replicas: 6}`, "spec.replicas", "less than or equal to 5"),
	{name: "storage shrunk", kind: mirror, obj: "shrink", from: `{upstream: "https://quay.io", storage: 20Gi}`,
		spec: `{upstream: "https://quay.io", storage: 5Gi}`, wantMsgs: []string{"spec.storage", "may grow but not shrink"}},
	{name: "storage class changed", kind: mirror, obj: "sc", from: `{upstream: "https://quay.io", storageClassName: fast}`,
		spec: `{upstream: "https://quay.io", storageClassName: slow}`, wantMsgs: []string{"spec", "spec.storageClassName is immutable"}},
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
			u := decode(t, mirror.doc("retention", tc.spec))
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
			obj := decode(t, tc.kind.doc(tc.obj, tc.spec))
			var err error
			if tc.from != "" {
				orig := decode(t, tc.kind.doc(tc.obj, tc.from))
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
	create(t, agent, "both-versions", `{tantrumMode: true, podTolerance: 5, eagerness: 77, ipsumMode: true, dryRun: true}`)
	patchV1alpha1(t, "both-versions", `{"spec":{"tantrumMode":true,"podTolerance":6}}`)
	spec := agentSpec(t, "v1beta1", "both-versions")
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
	create(t, agent, "guarded-agent", `
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
	spec := agentSpec(t, "v1beta1", "guarded-agent")
	guards := spec["guards"].([]any)
	require.Len(t, guards, 3)
	http := guards[2].(map[string]any)["http"].(map[string]any)
	assert.EqualValues(t, 200, http["expectedStatus"], "default expectedStatus")
	assert.EqualValues(t, 5, http["timeoutSeconds"], "default timeoutSeconds")
	assert.Equal(t, "75%", guards[0].(map[string]any)["deployment"].(map[string]any)["minReady"])
	assert.EqualValues(t, 2, guards[1].(map[string]any)["deployment"].(map[string]any)["minReady"])
	assert.Equal(t, spec, agentSpec(t, "v1alpha1", "guarded-agent"), "v1alpha1 serves the same spec")
	patchV1alpha1(t, "guarded-agent", `{"spec":{"tantrumMode":true,"podTolerance":10}}`)
	after := agentSpec(t, "v1beta1", "guarded-agent")
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
