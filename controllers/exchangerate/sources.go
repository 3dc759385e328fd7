package exchangerate

import (
	"fmt"
	"sync"

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
// default or any ExchangeRate's spec.sources names.
//
//   - Written by the reconcilers: For adds a source's cache the first time a spec names it
//     (under mu, never beyond max), and each cache's table is written by its own fetches.
//   - Read by every reconcile, for the caches of its spec's sources.
//   - Lost on a restart or a change of leader: the new leader fetches each source once more,
//     unconditionally, and forgets sources that no ExchangeRate names any more. Until then a
//     source nobody names keeps its cache (and its place under max) but is never fetched:
//     only reconciles of ExchangeRates that name it fetch.
type Sources struct {
	// defaults are the sources of ExchangeRates without spec.sources, in order.
	defaults []SourceRef
	max      int
	// newCache builds the cache of a source the first time it is named; an error is a
	// source the manager cannot build (a bad URL flag, caught at start for the defaults).
	newCache func(SourceRef) (*RateCache, error)

	mu     sync.Mutex
	caches map[SourceRef]*RateCache
}

// NewSources returns the manager's sources; the defaults' caches are built now, so a bad
// flag fails the start.
func NewSources(defaults []SourceRef, max int, newCache func(SourceRef) (*RateCache, error)) (*Sources, error) {
	s := &Sources{defaults: defaults, max: max, newCache: newCache, caches: map[SourceRef]*RateCache{}}
	if len(defaults) == 0 {
		return nil, fmt.Errorf("no default exchange rate source")
	}
	if len(defaults) > max {
		return nil, fmt.Errorf("--exchangerate-source names %d sources, more than --exchangerate-max-sources (%d)", len(defaults), max)
	}
	for _, ref := range defaults {
		if _, err := s.cache(ref); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// For returns the caches of the spec's sources in its order, the manager's defaults when
// it names none. A source beyond the limit is a *SourceLimitError.
func (s *Sources) For(specSources []operatorsv1.ExchangeRateSource) ([]*RateCache, error) {
	refs := s.defaults
	if len(specSources) > 0 {
		refs = make([]SourceRef, len(specSources))
		for i, src := range specSources {
			refs[i] = refOf(src)
		}
	}
	out := make([]*RateCache, 0, len(refs))
	for _, ref := range refs {
		c, err := s.cache(ref)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *Sources) cache(ref SourceRef) (*RateCache, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.caches[ref]; ok {
		return c, nil
	}
	if len(s.caches) >= s.max {
		return nil, &SourceLimitError{Source: ref.String(), Max: s.max}
	}
	c, err := s.newCache(ref)
	if err != nil {
		return nil, err
	}
	s.caches[ref] = c
	return c, nil
}
