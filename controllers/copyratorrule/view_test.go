package copyratorrule

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// cachedState is the copyState of obj as the copy cache has it.
func cachedState(t *testing.T, obj client.Object) copyState {
	t.Helper()
	stripped, err := stripBody(obj.DeepCopyObject())
	require.NoError(t, err)
	return stateOf(stripped.(client.Object))
}

func keys(pairs ...string) []flantv1.CopiedKey {
	var out []flantv1.CopiedKey
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, flantv1.CopiedKey{Key: pairs[i], TargetKey: pairs[i+1]})
	}
	return out
}

func TestViewOf(t *testing.T) {
	t.Run("no filter: the view of every key has no id", func(t *testing.T) {
		assert.Equal(t, "", viewOf(flantv1.CopyratorRuleSpec{}).id)
	})
	t.Run("keys name the view, renames included", func(t *testing.T) {
		a := viewOf(flantv1.CopyratorRuleSpec{Keys: keys("tls.crt", "")})
		b := viewOf(flantv1.CopyratorRuleSpec{Keys: keys("tls.crt", "ca.pem")})
		assert.NotEmpty(t, a.id)
		assert.NotEqual(t, a.id, b.id)
	})
	t.Run("Copyrator's own keys and kubectl's last applied content are never carried", func(t *testing.T) {
		v := viewOf(flantv1.CopyratorRuleSpec{
			CarryLabels:      []flantv1.MetadataKey{"team", LabelManagedBy, LabelRule, "copyrator.flant.com/x"},
			CarryAnnotations: []flantv1.MetadataKey{"owner", AnnotationContentHash, lastAppliedAnnotation},
		})
		assert.Equal(t, []string{"team"}, v.labels)
		assert.Equal(t, []string{"owner"}, v.annotations)
	})
}

func TestViewContent(t *testing.T) {
	tlsSecret := secret("tls", corev1.SecretTypeTLS, map[string]string{"tls.crt": "CERT", "tls.key": "KEY", "ca.crt": "CA"})
	for _, tc := range []struct {
		name     string
		src      *corev1.Secret
		keys     []flantv1.CopiedKey
		wantType corev1.SecretType
		wantData map[string]string
	}{
		{name: "every key: the source itself", src: tlsSecret, wantType: corev1.SecretTypeTLS,
			wantData: map[string]string{"tls.crt": "CERT", "tls.key": "KEY", "ca.crt": "CA"}},
		{name: "the keys a TLS Secret needs: type kept", src: tlsSecret, keys: keys("tls.crt", "", "tls.key", ""),
			wantType: corev1.SecretTypeTLS, wantData: map[string]string{"tls.crt": "CERT", "tls.key": "KEY"}},
		{name: "only the public half of a TLS Secret: Opaque", src: tlsSecret, keys: keys("tls.crt", "", "ca.crt", ""),
			wantType: corev1.SecretTypeOpaque, wantData: map[string]string{"tls.crt": "CERT", "ca.crt": "CA"}},
		{name: "a renamed required key: Opaque", src: tlsSecret, keys: keys("tls.crt", "cert.pem", "tls.key", ""),
			wantType: corev1.SecretTypeOpaque, wantData: map[string]string{"cert.pem": "CERT", "tls.key": "KEY"}},
		{name: "a key the source lacks is absent", src: tlsSecret, keys: keys("ca.crt", "", "missing", ""),
			wantType: corev1.SecretTypeOpaque, wantData: map[string]string{"ca.crt": "CA"}},
		{name: "basic-auth with the username alone: kept",
			src:  secret("ba", corev1.SecretTypeBasicAuth, map[string]string{"username": "u", "password": "p"}),
			keys: keys("username", ""), wantType: corev1.SecretTypeBasicAuth, wantData: map[string]string{"username": "u"}},
		{name: "docker config renamed: Opaque",
			src:  secret("reg", corev1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": "{}"}),
			keys: keys(".dockerconfigjson", "config.json"), wantType: corev1.SecretTypeOpaque, wantData: map[string]string{"config.json": "{}"}},
		{name: "a custom type is kept", src: secret("c", "example.com/thing", map[string]string{"a": "1", "b": "2"}),
			keys: keys("a", ""), wantType: "example.com/thing", wantData: map[string]string{"a": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := tc.src.DeepCopy()
			v := viewOf(flantv1.CopyratorRuleSpec{Keys: tc.keys})
			s := v.source(src)
			got := s.Object.(*corev1.Secret)
			assert.Equal(t, tc.wantType, got.Type)
			assert.Equal(t, tc.wantType, s.Type)
			data := map[string]string{}
			for k, b := range got.Data {
				data[k] = string(b)
			}
			assert.Equal(t, tc.wantData, data)
			assert.Equal(t, contentHash(got), s.Hash)
			assert.Equal(t, contentSize(got), s.Size)
			assert.Equal(t, tc.src, src, "the source is not changed")
			if tc.keys == nil {
				assert.Equal(t, contentHash(tc.src), s.Hash, "an unfiltered view hashes as before key filters existed")
			}
		})
	}
	t.Run("configmap data and binary data, renamed", func(t *testing.T) {
		cm := configMap("cfg", map[string]string{"a": "1", "b": "2"})
		cm.BinaryData = map[string][]byte{"bin": {0, 1}}
		cm.Immutable = ptr.To(true)
		s := viewOf(flantv1.CopyratorRuleSpec{Keys: keys("a", "a.conf", "bin", "")}).source(cm)
		got := s.Object.(*corev1.ConfigMap)
		assert.Equal(t, map[string]string{"a.conf": "1"}, got.Data)
		assert.Equal(t, map[string][]byte{"bin": {0, 1}}, got.BinaryData)
		assert.True(t, s.Immutable)
	})
	t.Run("the written copy hashes like the view: in sync after a write", func(t *testing.T) {
		s := viewOf(flantv1.CopyratorRuleSpec{Keys: keys("tls.crt", "")}).source(tlsSecret)
		c := desiredCopy(testID, s, "team-a")
		st := cachedState(t, c)
		assert.True(t, copyInSync(testID, &st, &s))
	})
}

func TestCarriedLabelsAndAnnotations(t *testing.T) {
	spec := flantv1.CopyratorRuleSpec{CarryLabels: []flantv1.MetadataKey{"team", "tier"}, CarryAnnotations: []flantv1.MetadataKey{"owner"}}
	v := viewOf(spec)
	src := configMap("cfg", map[string]string{"k": "v"})
	src.Labels["team"] = "a"
	src.Labels["other"] = "not carried"
	src.Annotations = map[string]string{"owner": "ops", "note": "not carried"}

	s := v.source(src)
	c := desiredCopy(testID, s, "team-a")
	assert.Equal(t, "a", c.GetLabels()["team"])
	assert.NotContains(t, c.GetLabels(), "other")
	assert.NotContains(t, c.GetLabels(), "copyrator", "the source's selector label is not carried unless named")
	assert.Equal(t, "ops", c.GetAnnotations()["owner"])
	assert.NotContains(t, c.GetAnnotations(), "note")
	assert.Equal(t, "team", c.GetAnnotations()[AnnotationCarriedLabels], "only labels the source has are recorded")
	assert.Equal(t, "owner", c.GetAnnotations()[AnnotationCarriedAnnotations])
	_, isCopy := ruleOfCopy(c)
	assert.True(t, isCopy)
	assert.False(t, notCopies.Matches(labels.Set(c.GetLabels())), "a copy is never a source")

	inSync := func(obj *corev1.ConfigMap, s source) bool {
		st := cachedState(t, obj)
		return copyInSync(testID, &st, &s)
	}
	require.True(t, inSync(c.(*corev1.ConfigMap), s))

	t.Run("a person changes a carried label: out of sync, the patch puts it back", func(t *testing.T) {
		edited := c.(*corev1.ConfigMap).DeepCopy()
		edited.Labels["team"] = "b"
		edited.Labels["mine"] = "kept"
		require.False(t, inSync(edited, s))
		st := stateOf(edited)
		got, err := applyPatch(t, edited, updatePatch(testID, c, &st))
		require.NoError(t, err)
		assert.True(t, inSync(got.(*corev1.ConfigMap), s))
		assert.Equal(t, "kept", got.GetLabels()["mine"])
	})
	t.Run("the source drops a label and changes an annotation: the copy follows", func(t *testing.T) {
		changed := src.DeepCopy()
		delete(changed.Labels, "team")
		changed.Labels["tier"] = "gold"
		changed.Annotations["owner"] = "dev"
		s2 := v.source(changed)
		old := c.(*corev1.ConfigMap).DeepCopy()
		old.Labels["mine"] = "kept"
		require.False(t, inSync(old, s2))
		st := stateOf(old)
		got, err := applyPatch(t, old, updatePatch(testID, desiredCopy(testID, s2, "team-a"), &st))
		require.NoError(t, err)
		assert.NotContains(t, got.GetLabels(), "team")
		assert.Equal(t, "gold", got.GetLabels()["tier"])
		assert.Equal(t, "dev", got.GetAnnotations()["owner"])
		assert.Equal(t, "kept", got.GetLabels()["mine"])
		assert.True(t, inSync(got.(*corev1.ConfigMap), s2))
	})
	t.Run("the rule stops carrying: carried keys and the records go, a person's stay", func(t *testing.T) {
		plain := newSource(src)
		old := c.(*corev1.ConfigMap).DeepCopy()
		old.Annotations["note"] = "a person's"
		require.False(t, inSync(old, plain))
		st := stateOf(old)
		got, err := applyPatch(t, old, updatePatch(testID, desiredCopy(testID, plain, "team-a"), &st))
		require.NoError(t, err)
		assert.Equal(t, copyLabels(testID), got.GetLabels())
		assert.Equal(t, map[string]string{AnnotationSource: "src/cfg", AnnotationContentHash: plain.Hash, "note": "a person's"}, got.GetAnnotations())
		assert.True(t, inSync(got.(*corev1.ConfigMap), plain))
	})
	t.Run("a recorded label someone removed: out of sync", func(t *testing.T) {
		edited := c.(*corev1.ConfigMap).DeepCopy()
		delete(edited.Labels, "team")
		assert.False(t, inSync(edited, s))
	})
	t.Run("released copies lose the records, keep what they carry", func(t *testing.T) {
		got, err := applyPatch(t, c, releasePatch(testID, c.GetLabels(), c.GetAnnotations(), "src/cfg"))
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"team": "a"}, got.GetLabels())
		assert.Equal(t, map[string]string{AnnotationSource: "src/cfg", "owner": "ops"}, got.GetAnnotations())
	})
	t.Run("a copy written without carried metadata is in sync with a rule that carries none", func(t *testing.T) {
		plain := newSource(src)
		c := desiredCopy(testID, plain, "team-a").(*corev1.ConfigMap)
		assert.NotContains(t, c.Annotations, AnnotationCarriedLabels)
		assert.True(t, inSync(c, plain))
	})
}

func TestPicker(t *testing.T) {
	obj := func(name string, l map[string]string) metav1.Object {
		return &metav1.ObjectMeta{Name: name, Labels: l}
	}
	byName, err := pickerOf(&flantv1.CopyratorRule{Spec: flantv1.CopyratorRuleSpec{SourceNames: []string{"a", "b"}}})
	require.NoError(t, err)
	assert.True(t, byName.picks(obj("a", nil)))
	assert.False(t, byName.picks(obj("c", map[string]string{"copyrator": "true"})))

	byLabel, err := pickerOf(&flantv1.CopyratorRule{Spec: flantv1.CopyratorRuleSpec{Selector: map[string]flantv1.LabelValue{"copyrator": "true"}}})
	require.NoError(t, err)
	assert.True(t, byLabel.picks(obj("c", map[string]string{"copyrator": "true"})))
	assert.False(t, byLabel.picks(obj("a", nil)))
	assert.False(t, byLabel.picks(obj("c", map[string]string{"copyrator": "true", LabelManagedBy: ManagedByValue})), "never a copy")
}
