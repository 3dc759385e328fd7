package exchangerate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// SourceLimitError says a spec names a source beyond the manager's limit: a spec mistake.
type SourceLimitError struct {
	Source string
	Max    int
}

func (e *SourceLimitError) Error() string {
	return fmt.Sprintf("the manager already fetches from %d sources (--exchangerate-max-sources) and %s would be one more; "+
		"name sources other ExchangeRates use, or ask the admin to raise the limit", e.Max, e.Source)
}

// Sources holds a RateCache per source the defaults or a spec named, at most max, and the
// sources each ExchangeRate's last pass named: one nobody names gives its place when needed.
type Sources struct {
	defaults []SourceRef                         // of ExchangeRates without spec.sources; never dropped
	max      int                                 // --exchangerate-max-sources
	newCache func(SourceRef) (*RateCache, error) // builds a source's cache the first time it is named

	mu     sync.Mutex
	caches map[SourceRef]*RateCache
	names  map[types.NamespacedName][]SourceRef
}

// NewSources returns the manager's sources, the defaults' built: a bad flag fails the start.
func NewSources(defaults []SourceRef, max int, newCache func(SourceRef) (*RateCache, error)) (*Sources, error) {
	s := &Sources{defaults: defaults, max: max, newCache: newCache, caches: map[SourceRef]*RateCache{},
		names: map[types.NamespacedName][]SourceRef{}}
	if len(defaults) == 0 {
		return nil, fmt.Errorf("no default exchange rate source")
	}
	if len(defaults) > max {
		return nil, fmt.Errorf("--exchangerate-source names %d sources, more than --exchangerate-max-sources (%d)", len(defaults), max)
	}
	for _, ref := range defaults {
		if _, err := s.cache(ref, nil); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// For returns the caches of the spec's sources (or the defaults) and notes that xr names them.
func (s *Sources) For(xr types.NamespacedName, specSources []operatorsv1.ExchangeRateSource) ([]*RateCache, error) {
	refs := s.defaults
	if len(specSources) > 0 {
		refs = make([]SourceRef, len(specSources))
		for i, src := range specSources {
			refs[i] = SourceRef{Type: string(src.Type), Provider: src.Provider}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, xr)
	out := make([]*RateCache, 0, len(refs))
	for _, ref := range refs {
		c, err := s.cache(ref, refs)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	s.names[xr] = slices.Clone(refs)
	return out, nil
}

// Defaults returns the caches of the manager's default sources, in order.
func (s *Sources) Defaults() []*RateCache {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*RateCache, len(s.defaults))
	for i, ref := range s.defaults {
		out[i] = s.caches[ref]
	}
	return out
}

// Forget records that xr, which is gone, names no source any more.
func (s *Sources) Forget(xr types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, xr)
}

// cache returns ref's cache, built when new after dropping one nobody names at the limit.
func (s *Sources) cache(ref SourceRef, keep []SourceRef) (*RateCache, error) {
	if c, ok := s.caches[ref]; ok {
		return c, nil
	}
	if len(s.caches) >= s.max {
		named := sets.New(slices.Concat(s.defaults, keep)...)
		for _, refs := range s.names {
			named.Insert(refs...)
		}
		unnamed := slices.DeleteFunc(slices.Collect(maps.Keys(s.caches)), named.Has)
		if len(unnamed) == 0 {
			return nil, &SourceLimitError{Source: ref.String(), Max: s.max}
		}
		drop := slices.MinFunc(unnamed, func(a, b SourceRef) int { return strings.Compare(a.String(), b.String()) })
		delete(s.caches, drop)
		lastSuccess.DeleteLabelValues(drop.String()) // its request counters keep their history
	}
	c, err := s.newCache(ref)
	if err != nil {
		return nil, err
	}
	s.caches[ref] = c
	return c, nil
}

// exponentialBackoff is the wait after each failed fetch: base, doubling up to max.
func exponentialBackoff(base, max time.Duration) wait.Backoff {
	return wait.Backoff{Duration: base, Factor: 2, Cap: max, Steps: math.MaxInt32}
}

// Snapshot is a RateCache's state: the last good table (failures never replace it), when
// the source confirmed (200 or 304) and sent it (200), and the last failure and next try.
type Snapshot struct {
	Table     *Table
	CheckedAt time.Time
	FetchedAt time.Time
	Err       error // a *FetchError
	RetryAt   time.Time
}

// RateCache is the one table of a source that every ExchangeRate reads: concurrent callers
// share one request, later ones find the fresh table; after a failure none asks before RetryAt.
type RateCache struct {
	source   Source
	schedule Schedule
	clock    clock.PassiveClock
	backoff  wait.Backoff // the schedule every run of failures starts from
	timeout  time.Duration
	flight   singleflight.Group

	mu       sync.Mutex
	state    Snapshot
	attempts uint64
	retry    wait.Backoff // the current run of failures: one Step per failure
}

// NewRateCache returns an empty cache of source; timeout bounds each fetch.
func NewRateCache(source Source, clk clock.PassiveClock, backoff wait.Backoff, timeout time.Duration) *RateCache {
	return &RateCache{source: source, schedule: sourceSchedule(source), clock: clk, backoff: backoff, retry: backoff, timeout: timeout}
}

// Name and Schedule are the source's.
func (c *RateCache) Name() string       { return c.source.Name() }
func (c *RateCache) Schedule() Schedule { return c.schedule }

// Get returns the source's table, fetched when it is due (dueAt) or a retry is.
func (c *RateCache) Get(ctx context.Context, maxAge time.Duration) Snapshot {
	c.mu.Lock()
	s, seen := c.state, c.attempts
	c.mu.Unlock()
	if now := c.clock.Now(); (s.Err != nil && now.Before(s.RetryAt)) || (s.Err == nil && s.Table != nil && now.Before(dueAt(s, c.schedule, maxAge))) {
		return s
	}
	// The first caller's context must not cancel the others' answer: the fetch has its own.
	_, _, _ = c.flight.Do("fetch", func() (any, error) {
		c.fetch(context.WithoutCancel(ctx), seen)
		return nil, nil
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// fetch asks the source once, unless an attempt finished since the caller looked.
func (c *RateCache) fetch(ctx context.Context, seen uint64) {
	c.mu.Lock()
	prev, answered := c.state.Table, c.attempts != seen
	c.mu.Unlock()
	if answered {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now() //nolint:forbidigo // latency is an observation for metrics, not a decision: real time
	t, err := c.source.Fetch(ctx, prev)
	elapsed := time.Since(start) //nolint:forbidigo // as start

	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts++
	now := c.clock.Now()
	if err != nil {
		var fe *FetchError
		if !errors.As(err, &fe) {
			fe = &FetchError{Reason: operatorsv1.ReasonUpstreamUnreachable, Err: err}
		}
		c.state.Err, c.state.RetryAt = fe, now.Add(c.retry.Step())
		recordFetch(c.source.Name(), fe.result(), elapsed, time.Time{})
		return
	}
	result := "ok"
	if t == prev {
		result = "not_modified"
	}
	// Never step back to an older publication (a mirror behind a load balancer).
	if prev != nil && t.Date < prev.Date {
		t = prev
	}
	if t != prev {
		c.state.FetchedAt = now
	}
	c.retry, c.state.Table, c.state.CheckedAt, c.state.Err, c.state.RetryAt = c.backoff, t, now, nil, time.Time{}
	recordFetch(c.source.Name(), result, elapsed, now)
}
