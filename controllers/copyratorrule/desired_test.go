package copyratorrule

import (
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

var testRule = types.NamespacedName{Namespace: "src", Name: "main-rule"}

// testID is testRule with its UID.
var testID = ruleID{NamespacedName: testRule, UID: "uid-main-rule"}

func secret(name string, typ corev1.SecretType, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: name, Labels: map[string]string{"copyrator": "true"},
		Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"}}, Type: typ, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "src", Name: name, Labels: map[string]string{"copyrator": "true"}}, Data: data}
}

// newSource wraps a whole source object and hashes its content, as a rule without a key
// filter and without carried metadata sees it.
func newSource(obj client.Object) source { return view{}.source(obj) }

func TestContentHash(t *testing.T) {
	base := configMap("a", map[string]string{"k": "v"})
	for _, tc := range []struct {
		name  string
		other client.Object
		same  bool
	}{
		{"same content, other metadata", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{"x": "y"}}, Data: map[string]string{"k": "v"}}, true},
		{"other value", configMap("a", map[string]string{"k": "w"}), false},
		{"extra key", configMap("a", map[string]string{"k": "v", "l": "v"}), false},
		{"same key as binary data", &corev1.ConfigMap{BinaryData: map[string][]byte{"k": []byte("v")}}, false},
		{"immutable", &corev1.ConfigMap{Data: map[string]string{"k": "v"}, Immutable: ptr.To(true)}, false},
		{"immutable false equals unset", &corev1.ConfigMap{Data: map[string]string{"k": "v"}, Immutable: ptr.To(false)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, contentHash(base) == contentHash(tc.other))
		})
	}
	t.Run("empty and nil maps hash alike", func(t *testing.T) {
		assert.Equal(t, contentHash(&corev1.ConfigMap{}), contentHash(&corev1.ConfigMap{Data: map[string]string{}, BinaryData: map[string][]byte{}}))
		assert.Equal(t, contentHash(&corev1.Secret{Type: "Opaque"}), contentHash(&corev1.Secret{Type: "Opaque", Data: map[string][]byte{}}))
	})
	t.Run("secret type counts", func(t *testing.T) {
		assert.NotEqual(t, contentHash(secret("a", corev1.SecretTypeOpaque, map[string]string{".dockerconfigjson": "{}"})),
			contentHash(secret("a", corev1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": "{}"})))
	})
	t.Run("stable across map orders", func(t *testing.T) {
		m := map[string]string{}
		for _, k := range []string{"z", "a", "m", "b", "y"} {
			m[k] = k
		}
		for range 20 {
			assert.Equal(t, contentHash(configMap("a", m)), contentHash(configMap("a", map[string]string{"a": "a", "b": "b", "m": "m", "y": "y", "z": "z"})))
		}
	})
}

func TestDesiredCopy(t *testing.T) {
	t.Run("secret keeps data, type and immutability, not the source's metadata", func(t *testing.T) {
		src := secret("registry", corev1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": `{"auths":{}}`})
		src.Immutable = ptr.To(true)
		s := newSource(src)
		got := desiredCopy(testID, s, "team-a").(*corev1.Secret)
		assert.Equal(t, "team-a", got.Namespace)
		assert.Equal(t, "registry", got.Name)
		assert.Equal(t, corev1.SecretTypeDockerConfigJson, got.Type)
		assert.Equal(t, src.Data, got.Data)
		assert.Equal(t, ptr.To(true), got.Immutable)
		assert.Equal(t, map[string]string{LabelManagedBy: "copyrator", LabelRule: "main-rule", LabelRuleNamespace: "src",
			LabelRuleUID: "uid-main-rule"}, got.Labels)
		assert.Equal(t, map[string]string{AnnotationSource: "src/registry", AnnotationContentHash: s.Hash}, got.Annotations)
		assert.Empty(t, got.UID)
		assert.Empty(t, got.ResourceVersion)
		assert.Equal(t, s.Hash, contentHash(got), "a copy hashes like its source")
	})
	t.Run("configmap keeps data and binary data; mutable copies carry no immutable field", func(t *testing.T) {
		src := configMap("settings", map[string]string{"a": "1"})
		src.BinaryData = map[string][]byte{"b": {0, 1, 2}}
		src.Immutable = ptr.To(false)
		got := desiredCopy(testID, newSource(src), "team-b").(*corev1.ConfigMap)
		assert.Equal(t, src.Data, got.Data)
		assert.Equal(t, src.BinaryData, got.BinaryData)
		assert.Nil(t, got.Immutable)
		assert.Equal(t, contentHash(src), contentHash(got))
	})
}

// applyPatch applies a JSON patch to obj the way the API server does.
func applyPatch(t *testing.T, obj client.Object, patch []byte) (client.Object, error) {
	t.Helper()
	doc, err := json.Marshal(obj)
	require.NoError(t, err)
	p, err := jsonpatch.DecodePatch(patch)
	require.NoError(t, err)
	out, err := p.Apply(doc)
	if err != nil {
		return nil, err
	}
	res := newObject(kindOf(obj))
	require.NoError(t, json.Unmarshal(out, res))
	return res, nil
}

func TestUpdatePatch(t *testing.T) {
	src := newSource(configMap("settings", map[string]string{"a": "2", "c": "3"}))
	desired := desiredCopy(testID, src, "team-a")

	existing := desiredCopy(testID, newSource(configMap("settings", map[string]string{"a": "1", "b": "gone"})), "team-a").(*corev1.ConfigMap)
	existing.Labels["team"] = "kept"
	existing.Annotations["note"] = "kept"
	existing.BinaryData = map[string][]byte{"x": []byte("added by a person")}

	for _, tc := range []struct {
		name    string
		mutate  func(*corev1.ConfigMap)
		wantErr bool
	}{
		{name: "own copy is replaced, other labels and annotations stay"},
		{name: "copy without annotations", mutate: func(c *corev1.ConfigMap) { c.Annotations = nil }},
		{name: "taken over: managed-by removed", mutate: func(c *corev1.ConfigMap) { delete(c.Labels, LabelManagedBy) }, wantErr: true},
		{name: "another rule's copy", mutate: func(c *corev1.ConfigMap) { c.Labels[LabelRule] = "other" }, wantErr: true},
		{name: "same rule name in another namespace", mutate: func(c *corev1.ConfigMap) { c.Labels[LabelRuleNamespace] = "elsewhere" }, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := existing.DeepCopy()
			if tc.mutate != nil {
				tc.mutate(obj)
			}
			st := stateOf(obj)
			got, err := applyPatch(t, obj, updatePatch(testID, desired, &st))
			if tc.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			cm := got.(*corev1.ConfigMap)
			assert.Equal(t, map[string]string{"a": "2", "c": "3"}, cm.Data)
			assert.Empty(t, cm.BinaryData)
			assert.Equal(t, src.Hash, contentHash(cm))
			for k, v := range desired.GetAnnotations() {
				assert.Equal(t, v, cm.Annotations[k])
			}
			if obj.Annotations != nil {
				assert.Equal(t, "kept", cm.Annotations["note"])
			}
			assert.Equal(t, "kept", cm.Labels["team"])
		})
	}

	t.Run("secret data and immutability", func(t *testing.T) {
		s := secret("reg", corev1.SecretTypeOpaque, map[string]string{"k": "new"})
		s.Immutable = ptr.To(true)
		d := desiredCopy(testID, newSource(s), "team-a")
		old := desiredCopy(testID, newSource(secret("reg", corev1.SecretTypeOpaque, map[string]string{"k": "old", "x": "y"})), "team-a")
		st := stateOf(old)
		got, err := applyPatch(t, old, updatePatch(testID, d, &st))
		require.NoError(t, err)
		assert.Equal(t, map[string][]byte{"k": []byte("new")}, got.(*corev1.Secret).Data)
		assert.Equal(t, ptr.To(true), got.(*corev1.Secret).Immutable)
		assert.Equal(t, contentHash(s), contentHash(got))
	})
}

func TestReleasePatch(t *testing.T) {
	c := desiredCopy(testID, newSource(configMap("settings", map[string]string{"a": "1"})), "team-a").(*corev1.ConfigMap)
	c.Labels["team"] = "kept"
	c.Annotations["note"] = "kept"

	source := testRule.Namespace + "/settings"
	got, err := applyPatch(t, c, releasePatch(testID, c.Labels, c.Annotations, source))
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "kept"}, got.GetLabels())
	assert.Equal(t, map[string]string{"note": "kept", AnnotationSource: source}, got.GetAnnotations(),
		"a released copy keeps saying where it came from")
	assert.Equal(t, c.Data, got.(*corev1.ConfigMap).Data)

	t.Run("annotations removed by someone", func(t *testing.T) {
		bare := c.DeepCopy()
		bare.Annotations = nil
		got, err := applyPatch(t, bare, releasePatch(testID, bare.Labels, nil, source))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{AnnotationSource: source}, got.GetAnnotations(), "the provenance is put back")
	})
	t.Run("not ours any more", func(t *testing.T) {
		other := c.DeepCopy()
		other.Labels[LabelRule] = "other"
		_, err := applyPatch(t, other, releasePatch(testID, other.Labels, other.Annotations, source))
		require.Error(t, err)
	})
}

func TestPointer(t *testing.T) {
	assert.Equal(t, "/metadata/labels/app.kubernetes.io~1managed-by", pointer("metadata", "labels", LabelManagedBy))
	assert.Equal(t, "/a~0b", pointer("a~b"))
}

func TestSourceSelector(t *testing.T) {
	rule := &flantv1.CopyratorRule{Spec: flantv1.CopyratorRuleSpec{Selector: map[string]flantv1.LabelValue{"copyrator": "true", "team": "a"}}}
	sel, err := sourceSelector(rule)
	require.NoError(t, err)
	assert.Equal(t, "app.kubernetes.io/managed-by!=copyrator,copyrator=true,team=a", sel.String())
	for _, tc := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"copyrator": "true", "team": "a"}, true},
		{map[string]string{"copyrator": "true", "team": "a", "extra": "x"}, true},
		{map[string]string{"copyrator": "true"}, false},
		{map[string]string{"copyrator": "true", "team": "a", LabelManagedBy: ManagedByValue}, false},
		{map[string]string{"copyrator": "true", "team": "a", LabelManagedBy: "helm"}, true},
	} {
		assert.Equal(t, tc.want, sel.Matches(labels.Set(tc.labels)), "%v", tc.labels)
	}
}

func TestRuleKind(t *testing.T) {
	for in, want := range map[flantv1.RuleType]string{"configmap": kindConfigMap, "ConfigMap": kindConfigMap, "secret": kindSecret, "Secret": kindSecret} {
		assert.Equal(t, want, ruleKind(in), in)
	}
}

// TestDesiredCopyOwnsItsMaps: the client decodes the API server's answer into the copy it
// writes, and a source's body is shared by the copies written in parallel and remembered
// for later passes: a copy's maps must not be the source's.
func TestDesiredCopyOwnsItsMaps(t *testing.T) {
	rule := ruleID{NamespacedName: types.NamespacedName{Namespace: "src", Name: "r"}}
	sec := secret("s", corev1.SecretTypeOpaque, map[string]string{"k": "v"})
	c := desiredCopy(rule, viewOf(flantv1.CopyratorRuleSpec{}).source(sec), "team-a").(*corev1.Secret)
	c.Data["k"], c.Data["added"] = []byte("decoded"), []byte("x")
	assert.Equal(t, map[string][]byte{"k": []byte("v")}, sec.Data, "the source's data is unchanged")

	cm := configMap("c", map[string]string{"k": "v"})
	cm.BinaryData = map[string][]byte{"b": {1}}
	cc := desiredCopy(rule, viewOf(flantv1.CopyratorRuleSpec{}).source(cm), "team-a").(*corev1.ConfigMap)
	cc.Data["added"], cc.BinaryData["added"] = "x", []byte{2}
	assert.Equal(t, map[string]string{"k": "v"}, cm.Data)
	assert.Equal(t, map[string][]byte{"b": {1}}, cm.BinaryData)
	assert.Nil(t, desiredCopy(rule, viewOf(flantv1.CopyratorRuleSpec{}).source(configMap("n", map[string]string{"k": "v"})),
		"team-a").(*corev1.ConfigMap).BinaryData, "no binary data stays no field")
}
