package exchangerate

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// SourceLimitError says a spec names a source the manager would have to add beyond its
// limit: a spec mistake for the user (or a limit for the admin), not an upstream failure.
type SourceLimitError struct {
	Source string
	Max    int
}

func (e *SourceLimitError) Error() string {
	return fmt.Sprintf("the manager already fetches from %d sources (--exchangerate-max-sources) and %s would be one more; "+
		"name sources other ExchangeRates use, or ask the admin to raise the limit", e.Max, e.Source)
}

// Sources is the controller's memory of its upstreams: one RateCache, the shared table
// with its validators and backoff, per source (type and provider) that the manager's
// default or any ExchangeRate's spec.sources names, and which ExchangeRates name each.
//
//   - Written by the reconcilers: For records the sources an ExchangeRate names and adds a
//     source's cache the first time one is named (under mu, never beyond max); Forget
//     drops an ExchangeRate that is gone. Each cache's table is written by its own fetches.
//   - Read by every reconcile, for the caches of its spec's sources.
//   - A source that no ExchangeRate names any more keeps its cache until its place under
//     max is needed: then it is dropped (with its last-success metric) for the new one. So
//     sources named once, months ago, never lock newer ones out.
//   - Lost on a restart or a change of leader: the new leader fetches each source once
//     more, unconditionally, as ExchangeRates name them again.
type Sources struct {
	// defaults are the sources of ExchangeRates without spec.sources, in order; they are
	// never dropped.
	defaults []SourceRef
	max      int
	// newCache builds the cache of a source the first time it is named; an error is a
	// source the manager cannot build (a bad URL flag, caught at start for the defaults).
	newCache func(SourceRef) (*RateCache, error)

	mu     sync.Mutex
	caches map[SourceRef]*RateCache
	// names are the sources each ExchangeRate's last pass named (by its spec or the
	// defaults).
	names map[types.NamespacedName][]SourceRef
}

// NewSources returns the manager's sources; the defaults' caches are built now, so a bad
// flag fails the start.
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

// For returns the caches of the spec's sources in its order, the manager's defaults when
// it names none, and records that the ExchangeRate xr names them (and no others). A source
// beyond the limit is a *SourceLimitError; xr then names none.
func (s *Sources) For(xr types.NamespacedName, specSources []operatorsv1.ExchangeRateSource) ([]*RateCache, error) {
	refs := s.defaults
	if len(specSources) > 0 {
		refs = make([]SourceRef, len(specSources))
		for i, src := range specSources {
			refs[i] = refOf(src)
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
		out[i] = s.caches[ref] // built by NewSources, never dropped
	}
	return out
}

// Forget records that the ExchangeRate xr names no source any more (it is gone).
func (s *Sources) Forget(xr types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.names, xr)
}

// cache returns ref's cache, building it when it is new; at the limit it first drops a
// source nobody names (not a default, nor one of keep: the sources the caller is getting),
// the first by name. Called under mu.
func (s *Sources) cache(ref SourceRef, keep []SourceRef) (*RateCache, error) {
	if c, ok := s.caches[ref]; ok {
		return c, nil
	}
	if len(s.caches) >= s.max {
		// Only here, at the limit, is it asked which sources are named: one look at
		// every ExchangeRate's names.
		named := map[SourceRef]bool{}
		for _, refs := range s.names {
			for _, r := range refs {
				named[r] = true
			}
		}
		unnamed := make([]SourceRef, 0, len(s.caches))
		for known := range s.caches {
			if !named[known] && !slices.Contains(s.defaults, known) && !slices.Contains(keep, known) {
				unnamed = append(unnamed, known)
			}
		}
		if len(unnamed) == 0 {
			return nil, &SourceLimitError{Source: ref.String(), Max: s.max}
		}
		drop := slices.MinFunc(unnamed, func(a, b SourceRef) int { return strings.Compare(a.String(), b.String()) })
		delete(s.caches, drop)
		forgetSource(drop.String())
	}
	c, err := s.newCache(ref)
	if err != nil {
		return nil, err
	}
	s.caches[ref] = c
	return c, nil
}
