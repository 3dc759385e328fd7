package exchangerate

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// scriptedSource answers fetches from a script and counts them; release, when set,
// holds every fetch until it is closed.
type scriptedSource struct {
	name    string
	calls   atomic.Int32
	mu      sync.Mutex
	answers []func(prev *Table) (*Table, error)
	release chan struct{}
}

func (s *scriptedSource) Name() string { return s.name }

func (s *scriptedSource) Fetch(ctx context.Context, prev *Table) (*Table, error) {
	s.calls.Add(1)
	if s.release != nil {
		<-s.release
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.answers) == 0 {
		return nil, errors.New("script exhausted")
	}
	a := s.answers[0]
	if len(s.answers) > 1 {
		s.answers = s.answers[1:]
	}
	return a(prev)
}

func tableAnswer(t *Table) func(*Table) (*Table, error) {
	return func(*Table) (*Table, error) { return t, nil }
}

func notModified(prev *Table) (*Table, error) { return prev, nil }

func failAnswer(reason string) func(*Table) (*Table, error) {
	return func(*Table) (*Table, error) {
		return nil, &FetchError{Reason: reason, Err: errors.New("boom: " + reason)}
	}
}

var t0 = time.Date(2026, 5, 15, 16, 0, 0, 0, time.UTC)

func TestRateCacheCoalescesConcurrentCallers(t *testing.T) {
	forgetRequestCounts(t, "test-coalesce")
	tab := mustTable(t, "test-coalesce", "2026-05-15", map[string]string{"USD": "1.1"})
	src := &scriptedSource{name: "test-coalesce", answers: []func(*Table) (*Table, error){tableAnswer(tab)}, release: make(chan struct{})}
	clk := clocktesting.NewFakePassiveClock(t0)
	c := NewRateCache(src, clk, exponentialBackoff(time.Minute, time.Hour), time.Second)

	const callers = 100
	var wg sync.WaitGroup
	results := make([]Snapshot, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.Get(context.Background(), time.Hour)
		}()
	}
	// Let the first caller reach the upstream, then answer it.
	require.Eventually(t, func() bool { return src.calls.Load() == 1 }, 5*time.Second, time.Millisecond)
	time.Sleep(20 * time.Millisecond) // give the others time to pile up behind it
	close(src.release)
	wg.Wait()

	assert.EqualValues(t, 1, src.calls.Load(), "one upstream request for all callers")
	for _, r := range results {
		assert.Same(t, tab, r.Table)
		assert.Equal(t, t0, r.CheckedAt)
		assert.NoError(t, r.Err)
	}
	assert.Equal(t, 1.0, counterValue(t, upstreamRequests.WithLabelValues("test-coalesce", "ok")))

	t.Log("callers after the flight find the table fresh")
	clk.SetTime(t0.Add(59 * time.Minute))
	c.Get(context.Background(), time.Hour)
	assert.EqualValues(t, 1, src.calls.Load())
}

func TestRateCacheRefreshFailureAndBackoff(t *testing.T) {
	forgetRequestCounts(t, "test-backoff")
	good := mustTable(t, "test-backoff", "2026-05-15", map[string]string{"USD": "1.1"})
	newer := mustTable(t, "test-backoff", "2026-05-18", map[string]string{"USD": "1.2"})
	src := &scriptedSource{name: "test-backoff", answers: []func(*Table) (*Table, error){
		tableAnswer(good),
		notModified,
		failAnswer(operatorsv1.ReasonUpstreamServerError),
		failAnswer(operatorsv1.ReasonUpstreamTimeout),
		failAnswer(operatorsv1.ReasonUpstreamMalformed),
		failAnswer(operatorsv1.ReasonUpstreamServerError),
		tableAnswer(newer),
	}}
	clk := clocktesting.NewFakePassiveClock(t0)
	c := NewRateCache(src, clk, exponentialBackoff(time.Minute, 3*time.Minute), time.Second)
	ctx := context.Background()

	s := c.Get(ctx, time.Hour)
	require.Same(t, good, s.Table)
	assert.Equal(t, t0, s.FetchedAt)

	t.Log("an hour later a 304 confirms the table: same table, new check time, same fetch time")
	clk.SetTime(t0.Add(time.Hour))
	s = c.Get(ctx, time.Hour)
	assert.Same(t, good, s.Table)
	assert.Equal(t, t0.Add(time.Hour), s.CheckedAt)
	assert.Equal(t, t0, s.FetchedAt, "a 304 does not bring the table again")
	assert.EqualValues(t, 2, src.calls.Load())
	assert.Equal(t, 1.0, counterValue(t, upstreamRequests.WithLabelValues("test-backoff", "not_modified")))

	t.Log("failures keep the good table and back off 1m, 2m, 3m (cap)")
	now := t0.Add(2 * time.Hour)
	for i, wantWait := range []time.Duration{time.Minute, 2 * time.Minute, 3 * time.Minute, 3 * time.Minute} {
		clk.SetTime(now)
		s = c.Get(ctx, time.Hour)
		assert.Same(t, good, s.Table, "failure %d", i)
		assert.Equal(t, t0.Add(time.Hour), s.CheckedAt, "failure %d", i)
		assert.Equal(t, t0, s.FetchedAt, "failure %d", i)
		require.Error(t, s.Err)
		assert.Equal(t, now.Add(wantWait), s.RetryAt, "failure %d", i)
		calls := src.calls.Load()

		t.Log("nobody reaches the upstream before RetryAt, whatever their maxAge")
		clk.SetTime(s.RetryAt.Add(-time.Second))
		s2 := c.Get(ctx, time.Nanosecond)
		assert.Equal(t, calls, src.calls.Load())
		assert.Equal(t, s.Err, s2.Err)
		now = s.RetryAt
	}
	var fe *FetchError
	require.ErrorAs(t, s.Err, &fe)
	assert.Equal(t, operatorsv1.ReasonUpstreamServerError, fe.Reason)
	assert.Equal(t, 2.0, counterValue(t, upstreamRequests.WithLabelValues("test-backoff", "server_error")))
	assert.Equal(t, 1.0, counterValue(t, upstreamRequests.WithLabelValues("test-backoff", "timeout")))

	t.Log("a due retry happens even when the caller's table is still fresh enough, and recovery clears the error")
	clk.SetTime(now)
	s = c.Get(ctx, 24*time.Hour)
	assert.Same(t, newer, s.Table)
	assert.NoError(t, s.Err)
	assert.True(t, s.RetryAt.IsZero())
	assert.Equal(t, now, s.CheckedAt)
	assert.Equal(t, now, s.FetchedAt, "the new table was fetched now")

	t.Log("after recovery the backoff starts again from Base")
	src.mu.Lock()
	src.answers = []func(*Table) (*Table, error){failAnswer(operatorsv1.ReasonUpstreamUnreachable)}
	src.mu.Unlock()
	clk.SetTime(now.Add(2 * time.Hour))
	s = c.Get(ctx, time.Hour)
	assert.Equal(t, now.Add(2*time.Hour+time.Minute), s.RetryAt)
	assert.Same(t, newer, s.Table)
}

func TestRateCacheFirstFetchFails(t *testing.T) {
	src := &scriptedSource{name: "test-first", answers: []func(*Table) (*Table, error){func(*Table) (*Table, error) {
		return nil, errors.New("not a FetchError")
	}}}
	c := NewRateCache(src, clocktesting.NewFakePassiveClock(t0), exponentialBackoff(time.Minute, time.Hour), time.Second)
	s := c.Get(context.Background(), time.Hour)
	assert.Nil(t, s.Table)
	assert.True(t, s.CheckedAt.IsZero())
	var fe *FetchError
	require.ErrorAs(t, s.Err, &fe)
	assert.Equal(t, operatorsv1.ReasonUpstreamUnreachable, fe.Reason)
	assert.Equal(t, t0.Add(time.Minute), s.RetryAt)
}

func TestRateCacheFetchHasItsOwnDeadline(t *testing.T) {
	var sawDeadline atomic.Bool
	src := &scriptedSource{name: "test-deadline", answers: []func(*Table) (*Table, error){tableAnswer(mustTable(t, "x", "2026-05-15", map[string]string{"USD": "1"}))}}
	wrapped := sourceFunc{name: "test-deadline", fetch: func(ctx context.Context, prev *Table) (*Table, error) {
		_, ok := ctx.Deadline()
		sawDeadline.Store(ok && ctx.Err() == nil)
		return src.Fetch(ctx, prev)
	}}
	c := NewRateCache(wrapped, clocktesting.NewFakePassiveClock(t0), exponentialBackoff(time.Minute, time.Hour), time.Second)
	// A caller whose context is already canceled still gets an answer for everyone.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s := c.Get(ctx, time.Hour)
	assert.NotNil(t, s.Table)
	assert.True(t, sawDeadline.Load())
}

type sourceFunc struct {
	name  string
	fetch func(context.Context, *Table) (*Table, error)
}

func (s sourceFunc) Name() string { return s.name }
func (s sourceFunc) Fetch(ctx context.Context, prev *Table) (*Table, error) {
	return s.fetch(ctx, prev)
}

// TestExponentialBackoff: the waits after 1, 2, 3, … consecutive failures.
func TestExponentialBackoff(t *testing.T) {
	b := exponentialBackoff(30*time.Second, 30*time.Minute)
	want := map[int]time.Duration{
		1: 30 * time.Second, 2: time.Minute, 3: 2 * time.Minute, 4: 4 * time.Minute, 6: 16 * time.Minute,
		7: 30 * time.Minute, 8: 30 * time.Minute, 1000: 30 * time.Minute,
	}
	for failures := 1; failures <= 1000; failures++ {
		got := b.Step()
		if w, ok := want[failures]; ok {
			assert.Equal(t, w, got, "failures=%d", failures)
		}
	}
	same := exponentialBackoff(time.Second, time.Second)
	for range 5 {
		assert.Equal(t, time.Second, same.Step(), "base equal to max")
	}
}

// counterValue reads a counter without prometheus/testutil (which would add a module).
func counterValue(t *testing.T, c interface{ Write(*dto.Metric) error }) float64 {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, c.Write(m))
	return m.GetCounter().GetValue()
}

func TestRateCacheNeverStepsBackToAnOlderPublication(t *testing.T) {
	newer := mustTable(t, "test-older", "2026-05-15", map[string]string{"USD": "1.2"})
	older := mustTable(t, "test-older", "2026-05-14", map[string]string{"USD": "1.1"})
	src := &scriptedSource{name: "test-older", answers: []func(*Table) (*Table, error){tableAnswer(newer), tableAnswer(older)}}
	clk := clocktesting.NewFakePassiveClock(t0)
	c := NewRateCache(src, clk, exponentialBackoff(time.Minute, time.Hour), time.Second)
	require.Same(t, newer, c.Get(context.Background(), time.Hour).Table)
	clk.SetTime(t0.Add(time.Hour))
	s := c.Get(context.Background(), time.Hour)
	assert.Same(t, newer, s.Table)
	assert.Equal(t, t0.Add(time.Hour), s.CheckedAt, "the source answered: that counts as a check")
	assert.Equal(t, t0, s.FetchedAt, "the table kept is the one fetched first")
	assert.NoError(t, s.Err)
}

// forgetRequestCounts drops the request counters of a test's source, so the counts the test
// asserts are its own when it runs more than once (go test -count).
func forgetRequestCounts(t *testing.T, source string) {
	t.Helper()
	upstreamRequests.DeletePartialMatch(prometheus.Labels{"source": source})
}

// testSources is a manager's set of sources over the public URLs (never fetched here).
func testSources(t *testing.T, max int, defaults ...SourceRef) (*Sources, *int) {
	t.Helper()
	built := 0
	s, err := NewSources(defaults, max, func(ref SourceRef) (*RateCache, error) {
		built++
		src, err := NewSource(ref.String(), "", http.DefaultClient)
		if err != nil {
			return nil, err
		}
		return NewRateCache(src, clocktesting.NewFakePassiveClock(t0), exponentialBackoff(time.Minute, time.Hour), time.Second), nil
	})
	require.NoError(t, err)
	return s, &built
}

func names(caches []*RateCache) []string {
	out := make([]string, len(caches))
	for i, c := range caches {
		out[i] = c.Name()
	}
	return out
}

func TestSourcesFor(t *testing.T) {
	s, built := testSources(t, 3, SourceRef{Type: "ecb"})
	assert.Equal(t, 1, *built, "the defaults are built at start")
	a, b, c := types.NamespacedName{Namespace: "t", Name: "a"}, types.NamespacedName{Namespace: "t", Name: "b"}, types.NamespacedName{Namespace: "t", Name: "c"}

	defaults, err := s.For(a, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"ecb"}, names(defaults), "no spec.sources: the manager's")
	assert.Equal(t, defaults, s.Defaults())

	spec := []operatorsv1.ExchangeRateSource{{Type: "frankfurter-v2", Provider: "ECB"}, {Type: "ecb"}}
	first, err := s.For(a, spec)
	require.NoError(t, err)
	assert.Equal(t, []string{"frankfurter-v2:ECB", "ecb"}, names(first), "the spec's order")
	assert.Same(t, defaults[0], first[1], "one cache per source, whoever names it")
	again, err := s.For(b, spec)
	require.NoError(t, err)
	assert.Same(t, first[0], again[0])
	assert.Equal(t, 2, *built)

	t.Log("a source beyond the limit is refused while every source is named, the known ones are not")
	_, err = s.For(c, []operatorsv1.ExchangeRateSource{{Type: "frankfurter-v2"}})
	require.NoError(t, err)
	_, err = s.For(c, []operatorsv1.ExchangeRateSource{{Type: "frankfurter-v2"}, {Type: "frankfurter-v2", Provider: "BOC"}})
	var limit *SourceLimitError
	require.ErrorAs(t, err, &limit)
	assert.Equal(t, SourceLimitError{Source: "frankfurter-v2:BOC", Max: 3}, *limit)
	_, err = s.For(c, []operatorsv1.ExchangeRateSource{{Type: "frankfurter-v2"}, {Type: "ecb"}})
	assert.NoError(t, err)
	assert.Equal(t, 3, *built)

	t.Log("a source nobody names any more gives its place to a new one; the default never does")
	s.Forget(a)
	_, err = s.For(b, nil) // b now names only the default: frankfurter-v2:ECB is named by nobody
	require.NoError(t, err)
	boc, err := s.For(a, []operatorsv1.ExchangeRateSource{{Type: "frankfurter-v2", Provider: "BOC"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"frankfurter-v2:BOC"}, names(boc))
	assert.Equal(t, 4, *built)
	ecbAgain, err := s.For(b, spec)
	require.ErrorAs(t, err, &limit, "frankfurter-v2:ECB went: naming it again needs a place, and none is free")
	assert.Nil(t, ecbAgain)

	t.Log("an ExchangeRate changing its sources does not lose the ones it keeps to the new one")
	s.Forget(c) // frankfurter-v2 is named by nobody now; a names BOC, the default is ecb
	swapped, err := s.For(a, []operatorsv1.ExchangeRateSource{{Type: "frankfurter-v2", Provider: "BOC"}, {Type: "frankfurter-v2", Provider: "ECB"}})
	require.NoError(t, err)
	assert.Same(t, boc[0], swapped[0], "BOC, which a keeps naming, is not the one dropped")
	assert.Equal(t, []string{"frankfurter-v2:BOC", "frankfurter-v2:ECB"}, names(swapped))
	assert.Same(t, defaults[0], s.Defaults()[0])
}

func TestNewSourcesRefuses(t *testing.T) {
	_, err := NewSources(nil, 3, nil)
	assert.ErrorContains(t, err, "no default exchange rate source")
	_, err = NewSources([]SourceRef{{Type: "ecb"}, {Type: "frankfurter"}}, 1, nil)
	assert.ErrorContains(t, err, "--exchangerate-source names 2 sources, more than --exchangerate-max-sources (1)")
	_, err = NewSources([]SourceRef{{Type: "ecb"}}, 1, func(SourceRef) (*RateCache, error) { return nil, errors.New("bad URL") })
	assert.ErrorContains(t, err, "bad URL")
}
