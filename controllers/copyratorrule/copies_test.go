package copyratorrule

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

func TestStripBody(t *testing.T) {
	src := secret("reg", corev1.SecretTypeDockerConfigJson, map[string]string{".dockerconfigjson": "{}"})
	src.Immutable = ptr.To(true)
	c := desiredCopy(testID, newSource(src), "team-a").(*corev1.Secret)
	c.UID = "u1"
	c.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "copyrator"}}
	want := contentHash(c)

	out, err := stripBody(c)
	require.NoError(t, err)
	s := out.(*corev1.Secret)
	assert.Nil(t, s.Data)
	assert.Nil(t, s.ManagedFields)
	assert.Equal(t, want, s.Annotations[cachedHashAnnotation])

	again, err := stripBody(s)
	require.NoError(t, err)
	assert.Equal(t, want, again.(*corev1.Secret).Annotations[cachedHashAnnotation], "idempotent: a second call keeps the hash of the body")

	st := stateOf(s)
	assert.Equal(t, copyState{Key: copyKey{kindSecret, "team-a", "reg"}, UID: "u1", Rule: testRule, RuleUID: string(testID.UID), Source: "src/reg",
		WrittenAs: want, Hash: want, Size: int64(len(".dockerconfigjson{}")), Type: corev1.SecretTypeDockerConfigJson, Immutable: true,
		HasAnnotations: true, Labels: s.Labels, Annotations: s.Annotations}, st)

	t.Run("configmap without annotations", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "c", Labels: copyLabels(testID)},
			Data: map[string]string{"a": "b"}, BinaryData: map[string][]byte{"x": {1}}}
		want := contentHash(cm)
		out, err := stripBody(cm)
		require.NoError(t, err)
		st := stateOf(out.(*corev1.ConfigMap))
		assert.Equal(t, want, st.Hash)
		assert.Equal(t, int64(len("ab")+len("x")+1), st.Size)
		assert.False(t, st.HasAnnotations)
		assert.Nil(t, out.(*corev1.ConfigMap).Data)
		assert.Nil(t, out.(*corev1.ConfigMap).BinaryData)
	})
	t.Run("only Copyrator's and the carried annotations are kept", func(t *testing.T) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "s", Labels: copyLabels(testID),
			Annotations: map[string]string{AnnotationSource: "src/s", AnnotationCarriedAnnotations: "team", "team": "a",
				lastAppliedAnnotation: `{"data":{"password":"c2VjcmV0"}}`, "padding": strings.Repeat("x", 1<<10)}},
			Data: map[string][]byte{"password": []byte("secret")}}
		out, err := stripBody(sec)
		require.NoError(t, err)
		ann := out.(*corev1.Secret).Annotations
		assert.NotContains(t, ann, lastAppliedAnnotation, "a Secret's data in an annotation is not held")
		assert.NotContains(t, ann, "padding")
		assert.Equal(t, "a", ann["team"], "carried: its record names it")
		assert.Equal(t, "src/s", ann[AnnotationSource])
		assert.Equal(t, "true", ann[cachedOthersAnnotation], "others' annotations were there")
		assert.True(t, stateOf(out.(*corev1.Secret)).HasAnnotations)
	})
	t.Run("tombstones pass through", func(t *testing.T) {
		tomb := toolscache.DeletedFinalStateUnknown{Key: "a/b"}
		out, err := stripBody(tomb)
		require.NoError(t, err)
		assert.Equal(t, tomb, out)
	})
}

func TestRuleOfCopy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   types.NamespacedName
		ok     bool
	}{
		{"copy", copyLabels(testID), testRule, true},
		{"no managed-by", map[string]string{LabelRule: "r", LabelRuleNamespace: "n"}, types.NamespacedName{}, false},
		{"managed by someone else", map[string]string{LabelManagedBy: "helm", LabelRule: "r", LabelRuleNamespace: "n"}, types.NamespacedName{}, false},
		{"rule namespace missing", map[string]string{LabelManagedBy: ManagedByValue, LabelRule: "r"}, types.NamespacedName{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := ruleOfCopy(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}})
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.want, got)
			if ok {
				assert.Equal(t, []string{tc.want.String()}, indexByRule(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels}}))
			}
		})
	}
}

func TestForbiddenType(t *testing.T) {
	assert.False(t, forbiddenType(corev1.SecretTypeOpaque))
	assert.False(t, forbiddenType(corev1.SecretTypeDockerConfigJson))
	assert.False(t, forbiddenType(""), "a ConfigMap has no type")
	assert.True(t, forbiddenType(corev1.SecretTypeServiceAccountToken))
	assert.True(t, forbiddenType(corev1.SecretTypeBootstrapToken))
}
