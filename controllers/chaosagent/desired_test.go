package chaosagent

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestMarkChanged(t *testing.T) {
	for _, tc := range []struct {
		name            string
		labels, ann     map[string]string
		wantLbl, wantAn map[string]string
	}{
		{name: "first change records the original and the agent",
			wantLbl: map[string]string{LabelAgent: "edmund"}, wantAn: map[string]string{"k": "new"}},
		{name: "second change keeps the first original and its agent",
			labels: map[string]string{LabelAgent: "baldrick", "app": "web"}, ann: map[string]string{"k": "first"},
			wantLbl: map[string]string{LabelAgent: "baldrick", "app": "web"}, wantAn: map[string]string{"k": "first"}},
		{name: "an original without its label is labelled so someone restores it",
			ann:     map[string]string{"k": "first"},
			wantLbl: map[string]string{LabelAgent: "edmund"}, wantAn: map[string]string{"k": "first"}},
		{name: "a stale label without an original is taken over",
			labels:  map[string]string{LabelAgent: "baldrick"},
			wantLbl: map[string]string{LabelAgent: "edmund"}, wantAn: map[string]string{"k": "new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := &metav1.ObjectMeta{Labels: tc.labels, Annotations: tc.ann}
			markChanged(obj, "edmund", "k", "new")
			assert.Equal(t, tc.wantLbl, obj.Labels)
			assert.Equal(t, tc.wantAn, obj.Annotations)
		})
	}
}

func TestCancerDeployment(t *testing.T) {
	dep := func(r *int32, ann map[string]string) *appsv1.Deployment {
		d := deployment("a", "web", r)
		d.Annotations = ann
		d.ResourceVersion = "7"
		return &d
	}
	for _, tc := range []struct {
		name             string
		in               *appsv1.Deployment
		from, to         int32
		skip             string
		wantOriginal     string
		wantOriginalKept bool
	}{
		{name: "doubles and records", in: dep(ptr.To[int32](3), nil), from: 3, to: 6, wantOriginal: "3"},
		{name: "unset replicas count as one", in: dep(nil, nil), from: 1, to: 2, wantOriginal: "1"},
		{name: "capped at 128", in: dep(ptr.To[int32](100), nil), from: 100, to: 128, wantOriginal: "100"},
		{name: "second doubling keeps the first original", in: dep(ptr.To[int32](6), map[string]string{AnnotationOriginalReplicas: "3"}),
			from: 6, to: 12, wantOriginal: "3"},
		{name: "zero replicas cannot grow", in: dep(ptr.To[int32](0), nil), from: 0, to: 0, skip: SkipZeroReplicas},
		{name: "at the ceiling", in: dep(ptr.To[int32](128), nil), from: 128, to: 128, skip: SkipAtLimit},
		{name: "above the ceiling is left alone", in: dep(ptr.To[int32](300), nil), from: 300, to: 300, skip: SkipAtLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.in.DeepCopy()
			out, from, to, skip := cancerDeployment(tc.in, "edmund")
			assert.Equal(t, before, tc.in, "input not modified")
			assert.Equal(t, tc.from, from)
			assert.Equal(t, tc.to, to)
			assert.Equal(t, tc.skip, skip)
			if skip != "" {
				assert.Nil(t, out)
				return
			}
			assert.Equal(t, tc.to, *out.Spec.Replicas)
			assert.Equal(t, tc.wantOriginal, out.Annotations[AnnotationOriginalReplicas])
			assert.Equal(t, "edmund", out.Labels[LabelAgent])
			assert.Equal(t, "7", out.ResourceVersion)
		})
	}
}

func TestRestoreDeployment(t *testing.T) {
	d := deployment("a", "web", ptr.To[int32](12))
	d.Labels = map[string]string{LabelAgent: "edmund", "app": "web"}
	d.Annotations = map[string]string{AnnotationOriginalReplicas: "3", "keep": "me"}
	out, err := restoreDeployment(&d)
	require.NoError(t, err)
	assert.EqualValues(t, 3, *out.Spec.Replicas)
	assert.Equal(t, map[string]string{"app": "web"}, out.Labels)
	assert.Equal(t, map[string]string{"keep": "me"}, out.Annotations)
	assert.EqualValues(t, 12, *d.Spec.Replicas, "input not modified")

	d.Annotations[AnnotationOriginalReplicas] = "lots"
	out, err = restoreDeployment(&d)
	require.Error(t, err, "an unreadable original is reported")
	assert.EqualValues(t, 12, *out.Spec.Replicas, "replicas kept when the original is unreadable")
	assert.NotContains(t, out.Labels, LabelAgent, "marks removed anyway")
}

func TestIpsumConfigMap(t *testing.T) {
	cm := func(data map[string]string, immutable bool, ann map[string]string) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "settings", Annotations: ann}, Data: data}
		if immutable {
			c.Immutable = ptr.To(true)
		}
		return c
	}
	rng := func() *rand.Rand { return rand.New(rand.NewPCG(3, 4)) }
	t.Run("overwrites every value and records the original", func(t *testing.T) {
		in := cm(map[string]string{"a": "1", "b": "2"}, false, nil)
		out, skip := ipsumConfigMap(in, "edmund", rng())
		require.Empty(t, skip)
		assert.Len(t, out.Data, 2)
		for k, v := range out.Data {
			assert.NotEqual(t, in.Data[k], v)
			assert.True(t, strings.HasSuffix(v, "."), v)
		}
		var original map[string]string
		require.NoError(t, json.Unmarshal([]byte(out.Annotations[AnnotationOriginalData]), &original))
		assert.Equal(t, in.Data, original)
		assert.Equal(t, "edmund", out.Labels[LabelAgent])
		assert.Equal(t, map[string]string{"a": "1", "b": "2"}, in.Data, "input not modified")
		again, _ := ipsumConfigMap(in, "edmund", rng())
		assert.Equal(t, out, again, "the same seed writes the same text")
	})
	t.Run("second ipsum keeps the first original", func(t *testing.T) {
		in := cm(map[string]string{"a": "lorem"}, false, map[string]string{AnnotationOriginalData: `{"a":"1"}`})
		in.Labels = map[string]string{LabelAgent: "baldrick"}
		out, skip := ipsumConfigMap(in, "edmund", rng())
		require.Empty(t, skip)
		assert.Equal(t, `{"a":"1"}`, out.Annotations[AnnotationOriginalData])
		assert.Equal(t, "baldrick", out.Labels[LabelAgent])
	})
	for _, tc := range []struct {
		name string
		in   *corev1.ConfigMap
		skip string
	}{
		{"immutable", cm(map[string]string{"a": "1"}, true, nil), SkipImmutable},
		{"no data", cm(nil, false, nil), SkipNoData},
		{"binary data only", &corev1.ConfigMap{BinaryData: map[string][]byte{"b": {1}}}, SkipNoData},
		{"original larger than the annotation limit", cm(map[string]string{"big": strings.Repeat("x", 300*1024)}, false, nil), SkipOriginalTooLarge},
		{"original fits alone but not beside other annotations",
			cm(map[string]string{"big": strings.Repeat("x", 150*1024)}, false, map[string]string{"last-applied": strings.Repeat("y", 150*1024)}),
			SkipOriginalTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, skip := ipsumConfigMap(tc.in, "edmund", rng())
			assert.Nil(t, out)
			assert.Equal(t, tc.skip, skip)
		})
	}
}

func TestRestoreConfigMapPatch(t *testing.T) {
	m := &metav1.ObjectMeta{ResourceVersion: "42", Labels: map[string]string{LabelAgent: "edmund"},
		Annotations: map[string]string{AnnotationOriginalData: `{"a":"1","b":"two"}`}}
	patch, err := restoreConfigMapPatch(m)
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42","labels":{"blackadder.io/agent":null},
		"annotations":{"blackadder.io/original-data":null}},"data":{"a":"1","b":"two"}}`, string(patch))

	m.Annotations[AnnotationOriginalData] = "not json"
	patch, err = restoreConfigMapPatch(m)
	require.Error(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42","labels":{"blackadder.io/agent":null},
		"annotations":{"blackadder.io/original-data":null}}}`, string(patch), "only the marks go")
}

func TestLoremParagraph(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for i := 0; i < 100; i++ {
		p := loremParagraph(rng)
		sentences := strings.Count(p, ".")
		assert.GreaterOrEqual(t, sentences, 3, p)
		assert.LessOrEqual(t, sentences, 6, p)
		assert.Equal(t, strings.ToUpper(p[:1]), p[:1], p)
	}
	assert.Equal(t, loremParagraph(rand.New(rand.NewPCG(9, 9))), loremParagraph(rand.New(rand.NewPCG(9, 9))))
}
