package copyratorrule

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	flantv1 "github.com/quartet-operator/quartet/api/flant/v1"
)

// TestSourceContentReadOncePerVersion: the content of a source version is read once for
// every rule that picks it, whatever their key filters, body included (a later pass that
// writes copies of it reads nothing), and read again when it changes. The copy a rule wants
// and the rules that want a name come from the same memory. (The reader is a fake that
// counts GETs: this tests the bookkeeping, not the API server.)
func TestSourceContentReadOncePerVersion(t *testing.T) {
	ctx := context.Background()
	src := secret("tls", corev1.SecretTypeTLS, map[string]string{"tls.crt": "C", "tls.key": "K", "ca.crt": "A"})
	src.UID = "uid-1"
	changed := metav1.NewTime(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	gets := 0
	cs := fake.NewClientBuilder().WithObjects(src).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			err := c.Get(ctx, key, obj, opts...)
			obj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Time: &changed}}) // as the API server returns it
			return err
		},
	}).Build()
	require.NoError(t, cs.Get(ctx, client.ObjectKeyFromObject(src), src)) // its resourceVersion
	gets = 0
	w := newSourceWatcher(cs, nil)
	key := sourceKey{namespace: "src", kind: kindSecret}
	whole := viewOf(flantv1.CopyratorRuleSpec{})
	public := viewOf(flantv1.CopyratorRuleSpec{Keys: keys("tls.crt", "", "ca.crt", "ca.pem")})
	byName := picker{names: sets.New("tls")}
	wholeRule, publicRule := types.NamespacedName{Namespace: "src", Name: "whole"}, types.NamespacedName{Namespace: "src", Name: "public"}
	inf := toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
	require.NoError(t, inf.GetStore().Add(&metav1.PartialObjectMetadata{ObjectMeta: src.ObjectMeta}))
	w.informers[key] = &namespaceSources{informer: inf, versions: map[types.UID]*sourceVersion{}}
	w.rules[wholeRule] = ruleSelection{key: key, picker: byName, view: whole}
	w.rules[publicRule] = ruleSelection{key: key, picker: byName, view: public}

	_, ok := w.wanted(publicRule, kindSecret, "tls")
	assert.False(t, ok, "no version held: a copy's event is not taken for an echo")
	a, err := w.sourceOf(ctx, key, src, whole)
	require.NoError(t, err)
	assert.Equal(t, 1, gets)
	assert.NotNil(t, a.Object, "read now: with its body")
	assert.Equal(t, contentHash(src), a.Hash)
	assert.Equal(t, changed.Time, a.Changed.UTC(), "when it last changed, read before its managed fields are dropped")

	b, err := w.sourceOf(ctx, key, src, public)
	require.NoError(t, err)
	assert.Equal(t, 1, gets, "the other rule's view is of the version read")
	assert.Equal(t, a.Changed, b.Changed)
	assert.Equal(t, public.source(src).Hash, b.Hash)
	assert.Equal(t, corev1.SecretTypeOpaque, b.Type)

	t.Log("a later pass that writes copies of the version takes its body from memory")
	again, err := w.sourceOf(ctx, key, src, public)
	require.NoError(t, err)
	assert.Equal(t, 1, gets, "no GET for a remembered version")
	require.NotNil(t, again.Object)
	want := public.content(src).(*corev1.Secret)
	assert.Equal(t, want.Data, again.Object.(*corev1.Secret).Data, "the body as the rule's view sees it")
	assert.Equal(t, want.Type, again.Object.(*corev1.Secret).Type)
	assert.Empty(t, again.Object.GetManagedFields())
	wanted, ok := w.wanted(publicRule, kindSecret, "tls")
	assert.True(t, ok)
	assert.Equal(t, b.Hash, wanted.Hash, "what the rule wants a copy to be")
	_, ok = w.wanted(publicRule, kindConfigMap, "tls")
	assert.False(t, ok, "a ConfigMap is no copy of a Secret rule's source")
	assert.ElementsMatch(t, []types.NamespacedName{wholeRule, publicRule}, w.rulesPicking(kindSecret, "tls"), "the rules that want the name")
	assert.Empty(t, w.rulesPicking(kindSecret, "other"))

	newer := src.DeepCopy()
	newer.Data["tls.key"] = []byte("K2")
	require.NoError(t, cs.Update(ctx, newer))
	gets = 0
	c, err := w.sourceOf(ctx, key, newer, public)
	require.NoError(t, err)
	assert.Equal(t, 1, gets, "a new version is read again")
	assert.Equal(t, b.Hash, c.Hash, "a key the view leaves out changed: the same content")
	d, err := w.sourceOf(ctx, key, newer, whole)
	require.NoError(t, err)
	assert.Equal(t, 1, gets)
	assert.Equal(t, []byte("K2"), d.Object.(*corev1.Secret).Data["tls.key"], "the body of the new version")

	t.Log("a change to the source drops the version held")
	w.changed(key, true, newer)
	_, err = w.sourceOf(ctx, key, newer, whole)
	require.NoError(t, err)
	assert.Equal(t, 2, gets)
}
