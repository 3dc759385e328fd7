package exchangerate

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

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

func TestParseSourceRef(t *testing.T) {
	for in, want := range map[string]SourceRef{
		"ecb": {Type: "ecb"}, " frankfurter ": {Type: "frankfurter"}, "frankfurter-v2": {Type: "frankfurter-v2"},
		"frankfurter-v2:NBP.B": {Type: "frankfurter-v2", Provider: "NBP.B"},
	} {
		got, err := ParseSourceRef(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "oanda", "ecb:ECB", "frankfurter:ECB", "frankfurter-v2:", "frankfurter-v2:ecb", "frankfurter-v2:E"} {
		_, err := ParseSourceRef(in)
		assert.Error(t, err, in)
	}
	assert.Equal(t, "frankfurter-v2:ECB", SourceRef{Type: "frankfurter-v2", Provider: "ECB"}.String())
}
