package status

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
	"github.com/quartet-operator/quartet/test/testenv"
)

// env is an envtest API server: the status write needs a status subresource and real
// resourceVersions, nothing else.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunSuite(m, testenv.Envtest, &env))
}

// newExchangeRate creates an ExchangeRate to write the status of (no controller runs).
func newExchangeRate(t *testing.T, name string) *operatorsv1.ExchangeRate {
	t.Helper()
	ns := testenv.Namespace(t, env.Client, "status-write", nil)
	xr := &operatorsv1.ExchangeRate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: operatorsv1.ExchangeRateSpec{Currency: "USD", Base: "EUR"}}
	require.NoError(t, env.Client.Create(context.Background(), xr))
	return xr
}

// setRate returns a status function that sets the rate and counts its calls.
func setRate(rate string, calls *int) func(*operatorsv1.ExchangeRate) {
	return func(xr *operatorsv1.ExchangeRate) {
		*calls++
		xr.Status.Rate = rate
	}
}

func TestWriteStatusWritesAndSkips(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	xr := newExchangeRate(t, "writes")
	created := xr.ResourceVersion

	calls := 0
	written, err := write(ctx, env.Client, env.Client, xr, setRate("1.1", &calls))
	require.NoError(t, err)
	assert.NotEmpty(t, written)
	assert.True(t, CacheBehind(created, written), "the write made a newer resourceVersion")
	assert.Equal(t, written, xr.ResourceVersion, "obj is the object the API server returned")
	live := &operatorsv1.ExchangeRate{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(xr), live))
	assert.Equal(t, "1.1", live.Status.Rate)
	assert.Equal(t, written, live.ResourceVersion)

	again, err := write(ctx, env.Client, env.Client, xr, setRate("1.1", &calls))
	require.NoError(t, err)
	assert.Empty(t, again, "an unchanged status is not written")
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(xr), live))
	assert.Equal(t, written, live.ResourceVersion, "nothing reached the API server")
	assert.Equal(t, 2, calls)
}

// TestWriteStatusConflict: a write computed from a stale object is refused by the
// optimistic lock; the status function runs again on the object read past the cache, so
// what someone else wrote meanwhile is kept.
func TestWriteStatusConflict(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	xr := newExchangeRate(t, "conflict")
	stale := xr.DeepCopy()

	other := xr.DeepCopy()
	other.Status.Source = "someone else"
	require.NoError(t, env.Client.Status().Update(ctx, other))

	var seen []string
	written, err := write(ctx, env.Client, env.Client, stale, func(x *operatorsv1.ExchangeRate) {
		seen = append(seen, x.Status.Source)
		x.Status.Rate = "1.2"
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"", "someone else"}, seen, "applied to the stale object, then to the fresh one")
	live := &operatorsv1.ExchangeRate{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(xr), live))
	assert.Equal(t, "1.2", live.Status.Rate)
	assert.Equal(t, "someone else", live.Status.Source, "the other write survived")
	assert.Equal(t, written, live.ResourceVersion)
	assert.Equal(t, written, stale.ResourceVersion, "obj is the object last written")
}

// TestWriteStatusStaleCacheNoConflict: a pass whose cache is behind its own last write
// computes against the written object (StatusMemory.Latest): an unchanged status is not
// written again, and a changed one is written without a conflict.
func TestWriteStatusStaleCacheNoConflict(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	xr := newExchangeRate(t, "memory")
	cached := xr.DeepCopy() // what a lagging cache would still hold
	var memory Memory[*operatorsv1.ExchangeRate]

	calls := 0
	written, err := write(ctx, env.Client, env.Client, xr, setRate("1.3", &calls))
	require.NoError(t, err)
	memory.Wrote(xr)

	latest := memory.Latest(cached)
	assert.Equal(t, written, latest.ResourceVersion)
	again, err := write(ctx, env.Client, env.Client, latest, setRate("1.3", &calls))
	require.NoError(t, err)
	assert.Empty(t, again, "the status the cache does not show yet is not written twice")

	// failOnReread proves the next write needs no re-read (a conflict would need one).
	next, err := write(ctx, env.Client, failOnReread{t}, memory.Latest(cached), setRate("1.4", &calls))
	require.NoError(t, err)
	assert.True(t, CacheBehind(written, next))
	assert.Equal(t, 3, calls)
}

func TestWriteStatusNotFound(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	xr := newExchangeRate(t, "gone")
	require.NoError(t, env.Client.Delete(ctx, xr.DeepCopy()))
	calls := 0
	_, err := write(ctx, env.Client, env.Client, xr, setRate("1.5", &calls))
	assert.True(t, apierrors.IsNotFound(err), "got %v", err)
}

// failOnReread is a reader that fails the test when asked.
type failOnReread struct{ t *testing.T }

func (f failOnReread) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	f.t.Error("the status write re-read the object: its write conflicted")
	return apierrors.NewBadRequest("unexpected re-read")
}

func (f failOnReread) List(context.Context, client.ObjectList, ...client.ListOption) error {
	f.t.Error("unexpected List")
	return apierrors.NewBadRequest("unexpected list")
}

// observedGeneration is ExchangeRate's status.observedGeneration, for the Writer.
func observedGeneration(xr *operatorsv1.ExchangeRate) *int64 { return &xr.Status.ObservedGeneration }

// TestFinish: a pass that acted sets observedGeneration to the generation it read; one
// that did not leaves it, while what derive sets is written either way; prev is the status
// the pass derived from.
func TestFinish(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	xr := newExchangeRate(t, "finish")
	w := NewWriter(env.Client, env.Client, observedGeneration)

	calls := 0
	prev, err := w.Finish(ctx, xr, false, setRate("1.1", &calls))
	require.NoError(t, err)
	assert.Empty(t, prev.Status.Rate, "prev is the status before the pass")
	assert.Equal(t, "1.1", xr.Status.Rate)
	assert.Zero(t, xr.Status.ObservedGeneration, "a pass that did not act claims no generation")

	prev, err = w.Finish(ctx, xr, true, setRate("1.2", &calls))
	require.NoError(t, err)
	assert.Equal(t, "1.1", prev.Status.Rate)
	live := &operatorsv1.ExchangeRate{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(xr), live))
	assert.Equal(t, "1.2", live.Status.Rate)
	assert.Equal(t, live.Generation, live.Status.ObservedGeneration, "a pass that acted claims the generation it read")
	assert.Equal(t, 2, calls, "derive runs once per pass without a conflict")
}

// TestFinishConflictKeepsTheGenerationRead: a write that conflicts with a spec change is
// derived again on the newer object, but claims the generation the pass read, not the new
// one (the next pass, woken by the spec change, claims that).
func TestFinishConflictKeepsTheGenerationRead(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	xr := newExchangeRate(t, "finish-conflict")
	read := xr.DeepCopy()
	edited := xr.DeepCopy()
	edited.Spec.Currency = "GBP"
	require.NoError(t, env.Client.Update(ctx, edited))
	require.Greater(t, edited.Generation, read.Generation)

	calls := 0
	_, err := NewWriter(env.Client, env.Client, observedGeneration).Finish(ctx, read, true, setRate("1.3", &calls))
	require.NoError(t, err)
	assert.Equal(t, 2, calls, "derived again on the object read after the conflict")
	live := &operatorsv1.ExchangeRate{}
	require.NoError(t, env.Client.Get(ctx, client.ObjectKeyFromObject(xr), live))
	assert.Equal(t, "1.3", live.Status.Rate)
	assert.Equal(t, xr.Generation, live.Status.ObservedGeneration, "the generation the pass read")
}

// TestFinishNotFound: an object deleted during the pass ends it without an error.
func TestFinishNotFound(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	xr := newExchangeRate(t, "finish-gone")
	require.NoError(t, env.Client.Delete(ctx, xr.DeepCopy()))
	calls := 0
	_, err := NewWriter(env.Client, env.Client, observedGeneration, WithMemory[*operatorsv1.ExchangeRate]()).
		Finish(ctx, xr, true, setRate("1.5", &calls))
	assert.NoError(t, err)
}

// TestFinishWithMemory: a pass that starts from a cache behind the Writer's own last write
// derives from the written object: the same status is not written again, and a new one is
// written without a conflict.
func TestFinishWithMemory(t *testing.T) {
	env.Require(t)
	ctx := context.Background()
	xr := newExchangeRate(t, "finish-memory")
	cached := xr.DeepCopy()
	w := NewWriter(env.Client, failOnReread{t}, observedGeneration, WithMemory[*operatorsv1.ExchangeRate]())

	calls := 0
	_, err := w.Finish(ctx, xr, true, setRate("1.6", &calls))
	require.NoError(t, err)
	written := xr.ResourceVersion

	stale := cached.DeepCopy()
	prev, err := w.Finish(ctx, stale, true, setRate("1.6", &calls))
	require.NoError(t, err)
	assert.Equal(t, "1.6", prev.Status.Rate, "derived from the written object, not the stale cached one")
	assert.Equal(t, written, stale.ResourceVersion, "nothing written again")

	stale = cached.DeepCopy()
	_, err = w.Finish(ctx, stale, true, setRate("1.7", &calls))
	require.NoError(t, err)
	assert.True(t, CacheBehind(written, stale.ResourceVersion), "written without a conflict (failOnReread)")

	w.Forget(client.ObjectKeyFromObject(xr))
	assert.Equal(t, cached.ResourceVersion, w.Latest(cached.DeepCopy()).ResourceVersion, "forgotten")
}
