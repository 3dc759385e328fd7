package exchangerate

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quartet-operator/quartet/test/fakeupstream"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

func startFake(t testing.TB) *fakeupstream.Server {
	t.Helper()
	srv, err := fakeupstream.Start("127.0.0.1:0", "2026-05-15", fakeupstream.DefaultRates())
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

func TestNewSource(t *testing.T) {
	tests := []struct {
		name, source, url, wantURL, wantErr string
	}{
		{name: "ecb default", source: "ecb", wantURL: "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-daily.xml"},
		{name: "frankfurter default", source: "frankfurter", wantURL: "https://api.frankfurter.dev/v1/latest?base=EUR"},
		{name: "frankfurter v2 default", source: "frankfurter-v2", wantURL: "https://api.frankfurter.dev/v2/rates?base=EUR"},
		{name: "frankfurter v2, one provider", source: "frankfurter-v2:NBP.B", wantURL: "https://api.frankfurter.dev/v2/rates?base=EUR&providers=NBP.B"},
		{name: "self-hosted frankfurter v2", source: "frankfurter-v2:ECB", url: "http://frankfurter.internal:8080",
			wantURL: "http://frankfurter.internal:8080/v2/rates?base=EUR&providers=ECB"},
		{name: "mirror", source: "ecb", url: "http://mirror.internal:8080/", wantURL: "http://mirror.internal:8080/stats/eurofxref/eurofxref-daily.xml"},
		{name: "mirror with path prefix", source: "frankfurter", url: "https://mirror.internal/rates",
			wantURL: "https://mirror.internal/rates/v1/latest?base=EUR"},
		{name: "unknown source", source: "oanda", wantErr: `unknown exchange rate source "oanda"`},
		{name: "provider of the ECB", source: "ecb:ECB", wantErr: "only frankfurter-v2 takes a provider"},
		{name: "provider in lower case", source: "frankfurter-v2:ecb&x=1", wantErr: "is not an upper-case provider key"},
		{name: "no scheme", source: "ecb", url: "mirror.internal", wantErr: "not an http(s) base URL"},
		{name: "ftp", source: "ecb", url: "ftp://mirror.internal", wantErr: "not an http(s) base URL"},
		{name: "query", source: "ecb", url: "http://mirror.internal/?a=b", wantErr: "not an http(s) base URL"},
		{name: "token in the query refused, never echoed", source: "ecb", url: "https://mirror.internal/rates?token=s3cret",
			wantErr: `exchange rate URL "https://mirror.internal/rates" is not an http(s) base URL`},
		{name: "credentials refused, never echoed", source: "ecb", url: "https://rates:t0ken-s3cret@mirror.internal/",
			wantErr: "exchange rate URL for mirror.internal carries credentials"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSource(tt.source, tt.url, http.DefaultClient)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				assert.NotContains(t, err.Error(), "s3cret", "an error is logged: it never holds the credential")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.source, s.Name())
			assert.Equal(t, tt.wantURL, sourceURL(s))
		})
	}
}

// TestSourceFetch runs every source against the imitation upstream.
func TestSourceFetch(t *testing.T) {
	for _, name := range []string{SourceECB, SourceFrankfurter, SourceFrankfurterV2, SourceFrankfurterV2 + ":ECB"} {
		t.Run(name, func(t *testing.T) {
			srv := startFake(t)
			path := map[string]string{SourceECB: fakeupstream.ECBPath, SourceFrankfurter: fakeupstream.FrankfurterPath,
				SourceFrankfurterV2: fakeupstream.FrankfurterV2Path, SourceFrankfurterV2 + ":ECB": fakeupstream.FrankfurterV2Path}[name]
			src, err := NewSource(name, srv.URL(), &http.Client{Timeout: 500 * time.Millisecond})
			require.NoError(t, err)
			ctx := context.Background()

			t.Log("a plain fetch parses the table and keeps the validators")
			tab, err := src.Fetch(ctx, nil)
			require.NoError(t, err)
			assert.Equal(t, name, tab.Source)
			assert.Equal(t, "2026-05-15", tab.Date)
			assert.Len(t, tab.Rates, 29)
			rate, err := tab.Rate("EUR", "USD")
			require.NoError(t, err)
			assert.Equal(t, "1.1625", rate)
			assert.NotEmpty(t, tab.ETag)
			assert.NotEmpty(t, tab.LastModified)

			t.Log("an unchanged publication is a 304 that returns the previous table itself")
			again, err := src.Fetch(ctx, tab)
			require.NoError(t, err)
			assert.Same(t, tab, again)
			assert.Equal(t, 1, srv.NotModified())
			assert.Equal(t, 2, srv.Requests(path))

			t.Log("Last-Modified alone also makes the request conditional")
			again, err = src.Fetch(ctx, &Table{LastModified: tab.LastModified, Rates: tab.Rates, Date: tab.Date})
			require.NoError(t, err)
			assert.Equal(t, tab.Date, again.Date)
			assert.Equal(t, 2, srv.NotModified())

			t.Log("a new publication is fetched in full")
			srv.SetRates("2026-05-18", map[string]string{"USD": "1.17"})
			fresh, err := src.Fetch(ctx, tab)
			require.NoError(t, err)
			assert.NotSame(t, tab, fresh)
			assert.Equal(t, "2026-05-18", fresh.Date)
			assert.NotEqual(t, tab.ETag, fresh.ETag)

			failures := []struct {
				name    string
				arrange func()
				reason  string
				msg     string
			}{
				{"server error", func() { srv.Fail(fakeupstream.ServerError, 503) }, operatorsv1.ReasonUpstreamServerError, "503 Service Unavailable"},
				{"bad gateway", func() { srv.Fail(fakeupstream.ServerError, 502) }, operatorsv1.ReasonUpstreamServerError, "502 Bad Gateway"},
				{"garbage", func() { srv.Fail(fakeupstream.Garbage, 0) }, operatorsv1.ReasonUpstreamMalformed, "decoding"},
				{"incomplete document", func() { srv.Fail(fakeupstream.Incomplete, 0) }, operatorsv1.ReasonUpstreamMalformed, "decoding"},
				{"truncated transfer", func() { srv.Fail(fakeupstream.Truncated, 0) }, operatorsv1.ReasonUpstreamUnreachable, "unexpected EOF"},
				{"slow", func() { srv.SetDelay(2 * time.Second) }, operatorsv1.ReasonUpstreamTimeout, "did not answer in time"},
			}
			for _, f := range failures {
				srv.Heal()
				f.arrange()
				got, err := src.Fetch(ctx, fresh)
				var fe *FetchError
				require.ErrorAs(t, err, &fe, f.name)
				assert.Nil(t, got, f.name)
				assert.Equal(t, f.reason, fe.Reason, f.name)
				assert.Contains(t, err.Error(), f.msg, f.name)
			}
			srv.Heal()
		})
	}
}

// TestSourceSchedules: which sources publish at a known time.
func TestSourceSchedules(t *testing.T) {
	for name, want := range map[string]Schedule{
		"ecb": ecbSchedule(), "frankfurter": frankfurterECBSchedule(), "frankfurter-v2:ECB": frankfurterECBSchedule(),
		"frankfurter-v2": {}, "frankfurter-v2:BOC": {},
	} {
		src, err := NewSource(name, "", http.DefaultClient)
		require.NoError(t, err)
		got := sourceSchedule(src)
		assert.Equal(t, want.IsZero(), got.IsZero(), name)
		assert.Equal(t, want.After, got.After, name)
	}
	assert.True(t, sourceSchedule(sourceFunc{name: "x"}).IsZero(), "a Source without a Schedule method has none")
}

func TestSourceFetchClientErrors(t *testing.T) {
	t.Run("frankfurter v2: an unknown provider", func(t *testing.T) {
		srv := startFake(t)
		src, err := NewSource("frankfurter-v2:XYZ", srv.URL(), http.DefaultClient)
		require.NoError(t, err)
		_, err = src.Fetch(context.Background(), nil)
		var fe *FetchError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, operatorsv1.ReasonUpstreamMalformed, fe.Reason)
		assert.ErrorContains(t, err, "no rates; is XYZ one of the providers /v2/providers lists?")
	})
	t.Run("frankfurter v2 422 message", func(t *testing.T) {
		srv := startFake(t)
		src, err := NewSource(SourceFrankfurterV2, srv.URL()+"/v2/rates?symbols=USD#", http.DefaultClient)
		require.Error(t, err, "a query in the base URL is refused")
		assert.Nil(t, src)
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"status":422,"message":"invalid currency: XXX"}`))
		}))
		defer ts.Close()
		src, err = NewSource(SourceFrankfurterV2, ts.URL, http.DefaultClient)
		require.NoError(t, err)
		_, err = src.Fetch(context.Background(), nil)
		require.ErrorContains(t, err, "422 Unprocessable Entity: invalid currency: XXX")
	})
	t.Run("frankfurter 404 message", func(t *testing.T) {
		srv := startFake(t)
		// Any other path under /v1/ is Frankfurter's JSON 404.
		src, err := NewSource(SourceFrankfurter, srv.URL()+"/v1/nothing", http.DefaultClient)
		require.NoError(t, err)
		_, err = src.Fetch(context.Background(), nil)
		var fe *FetchError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, operatorsv1.ReasonUpstreamRejected, fe.Reason)
		assert.Contains(t, err.Error(), "404 Not Found: not found")
	})
	t.Run("frankfurter 422 message", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"message":"invalid date"}`))
		}))
		defer ts.Close()
		src, err := NewSource(SourceFrankfurter, ts.URL, http.DefaultClient)
		require.NoError(t, err)
		_, err = src.Fetch(context.Background(), nil)
		require.ErrorContains(t, err, "422 Unprocessable Entity: invalid date")
	})
	t.Run("ecb 404", func(t *testing.T) {
		srv := startFake(t)
		src, err := NewSource(SourceECB, srv.URL()+"/elsewhere", http.DefaultClient)
		require.NoError(t, err)
		_, err = src.Fetch(context.Background(), nil)
		var fe *FetchError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, operatorsv1.ReasonUpstreamRejected, fe.Reason)
		assert.Equal(t, "rejected", fe.result())
	})
	t.Run("304 without having asked", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotModified) }))
		defer ts.Close()
		src, err := NewSource(SourceECB, ts.URL, http.DefaultClient)
		require.NoError(t, err)
		_, err = src.Fetch(context.Background(), nil)
		require.ErrorContains(t, err, "304 Not Modified to an unconditional request")
	})
	t.Run("oversized body", func(t *testing.T) {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write(make([]byte, maxBody+10))
		}))
		defer ts.Close()
		src, err := NewSource(SourceECB, ts.URL, http.DefaultClient)
		require.NoError(t, err)
		_, err = src.Fetch(context.Background(), nil)
		require.ErrorContains(t, err, "more than")
	})
	t.Run("nobody listening", func(t *testing.T) {
		ts := httptest.NewServer(http.NotFoundHandler())
		url := ts.URL
		ts.Close()
		src, err := NewSource(SourceECB, url, http.DefaultClient)
		require.NoError(t, err)
		_, err = src.Fetch(context.Background(), nil)
		var fe *FetchError
		require.ErrorAs(t, err, &fe)
		assert.Equal(t, operatorsv1.ReasonUpstreamUnreachable, fe.Reason)
	})
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
