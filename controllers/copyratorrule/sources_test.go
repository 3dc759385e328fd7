package copyratorrule

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// TestSourceContentReadOncePerVersion: the content of a source version is read once for
// every rule that picks it, whatever their key filters, and read again when it changes.
// (The clientset is a fake that counts GETs: this tests the bookkeeping, not the API server.)
func TestSourceContentReadOncePerVersion(t *testing.T) {
	src := secret("tls", corev1.SecretTypeTLS, map[string]string{"tls.crt": "C", "tls.key": "K", "ca.crt": "A"})
	src.UID, src.ResourceVersion = "uid-1", "1"
	cs := fake.NewClientset(src)
	gets := 0
	cs.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		gets++
		return false, nil, nil
	})
	w := newSourceWatcher(cs, nil, newFullPasses())
	key := sourceKey{namespace: "src", kind: kindSecret}
	whole := viewOf(flantv1.CopyratorRuleSpec{})
	public := viewOf(flantv1.CopyratorRuleSpec{Keys: keys("tls.crt", "", "ca.crt", "ca.pem")})
	byName := picker{names: sets.New("tls")}
	w.informers[key] = &namespaceSources{rules: map[types.NamespacedName]ruleSelection{
		{Namespace: "src", Name: "whole"}:  {key: key, picker: byName, view: whole},
		{Namespace: "src", Name: "public"}: {key: key, picker: byName, view: public},
	}}
	ctx := context.Background()

	a, err := w.sourceOf(ctx, key, src, whole)
	require.NoError(t, err)
	assert.Equal(t, 1, gets)
	assert.NotNil(t, a.Object, "read now: with its body")
	assert.Equal(t, contentHash(src), a.Hash)

	b, err := w.sourceOf(ctx, key, src, public)
	require.NoError(t, err)
	assert.Equal(t, 1, gets, "the other rule's view was filled by the first read")
	assert.Nil(t, b.Object, "known content: no body until loadBodies")
	assert.Equal(t, public.source(src).Hash, b.Hash)
	assert.Equal(t, corev1.SecretTypeOpaque, b.Type)

	t.Log("a later pass that writes copies of the version takes its body from memory")
	known := b
	acts, err := w.loadBodies(ctx, "src", kindSecret, public, []action{{Op: opCreate, Source: &known}, {Op: opUpdate, Source: &known}}, 2)
	require.NoError(t, err)
	assert.Len(t, acts, 2)
	assert.Equal(t, 1, gets, "no GET for a remembered version")
	require.NotNil(t, known.Object)
	want := public.content(src).(*corev1.Secret)
	assert.Equal(t, want.Data, known.Object.(*corev1.Secret).Data, "the body as the rule's view sees it")
	assert.Equal(t, want.Type, known.Object.(*corev1.Secret).Type)
	assert.Empty(t, known.Object.GetManagedFields())

	newer := src.DeepCopy()
	newer.ResourceVersion = "2"
	newer.Data["tls.key"] = []byte("K2")
	_, err = cs.CoreV1().Secrets("src").Update(ctx, newer, metav1.UpdateOptions{})
	require.NoError(t, err)
	gets = 0
	c, err := w.sourceOf(ctx, key, newer, public)
	require.NoError(t, err)
	assert.Equal(t, 1, gets, "a new version is read again")
	assert.Equal(t, b.Hash, c.Hash, "a key the view leaves out changed: the same content")
	_, err = w.sourceOf(ctx, key, newer, whole)
	require.NoError(t, err)
	assert.Equal(t, 1, gets)

	t.Log("a pass that planned with the old version reads the source again")
	stale := a
	stale.Object = nil
	_, err = w.loadBodies(ctx, "src", kindSecret, whole, []action{{Op: opCreate, Source: &stale}}, 1)
	require.NoError(t, err)
	assert.Equal(t, 2, gets, "the remembered body is of another version")
	assert.Equal(t, []byte("K2"), stale.Object.(*corev1.Secret).Data["tls.key"], "set from what it read")
}
