package fakeupstream

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func start(t *testing.T) *Server {
	t.Helper()
	s, err := Start("127.0.0.1:0", "2026-05-15", map[string]string{"USD": "1.1625", "JPY": "171.58"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func get(t *testing.T, url string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestECB(t *testing.T) {
	s := start(t)
	resp, body := get(t, s.URL()+ECBPath, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/xml", resp.Header.Get("Content-Type"))
	assert.Contains(t, body, `<gesmes:Envelope xmlns:gesmes="http://www.gesmes.org/xml/2002-08-01"`)
	assert.Contains(t, body, "<Cube time='2026-05-15'>")
	assert.Contains(t, body, "<Cube currency='USD' rate='1.1625'/>")
	assert.Less(t, strings.Index(body, "'JPY'"), strings.Index(body, "'USD'"), "sorted by code")
	etag, lastMod := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	require.NotEmpty(t, etag)
	require.NotEmpty(t, lastMod)

	resp, _ = get(t, s.URL()+ECBPath, map[string]string{"If-None-Match": etag})
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	resp, _ = get(t, s.URL()+ECBPath, map[string]string{"If-Modified-Since": lastMod})
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	resp, _ = get(t, s.URL()+ECBPath, map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lastMod})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "If-None-Match wins over If-Modified-Since")
	assert.Equal(t, 2, s.NotModified())
	assert.Equal(t, 4, s.Requests(ECBPath))

	s.SetRates("2026-05-18", map[string]string{"USD": "1.17"})
	resp, body = get(t, s.URL()+ECBPath, map[string]string{"If-None-Match": etag, "If-Modified-Since": lastMod})
	assert.Equal(t, http.StatusOK, resp.StatusCode, "a new table has new validators")
	assert.NotEqual(t, etag, resp.Header.Get("ETag"))
	assert.NotEqual(t, lastMod, resp.Header.Get("Last-Modified"))
	assert.Contains(t, body, "rate='1.17'")
}

func TestFrankfurter(t *testing.T) {
	s := start(t)
	resp, body := get(t, s.URL()+FrankfurterPath+"?base=EUR", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, `{"amount":1.0,"base":"EUR","date":"2026-05-15","rates":{"JPY":171.58,"USD":1.1625}}`, body)

	_, body = get(t, s.URL()+FrankfurterPath+"?base=USD&symbols=JPY,EUR", nil)
	var doc struct {
		Base  string
		Rates map[string]float64
	}
	require.NoError(t, json.Unmarshal([]byte(body), &doc))
	assert.Equal(t, "USD", doc.Base)
	assert.Equal(t, map[string]float64{"EUR": 0.86022, "JPY": 147.6}, doc.Rates)

	for q, want := range map[string]int{"?base=XYZ": 404, "?symbols=XYZ": 404, "?base=usd": 422, "?symbols=US": 422} {
		resp, body := get(t, s.URL()+FrankfurterPath+q, nil)
		assert.Equal(t, want, resp.StatusCode, q)
		assert.Contains(t, body, `"message":`, q)
	}
	resp, body = get(t, s.URL()+"/v1/currencies/nope", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.JSONEq(t, `{"message":"not found"}`, body)
	assert.Equal(t, 6, s.Requests(FrankfurterPath))
	assert.Equal(t, 7, s.Requests(""))
	s.ResetCounts()
	assert.Equal(t, 0, s.Requests(""))
}

// TestFrankfurterV2 checks the v2 imitation against the shape Frankfurter documents
// (lib/public/v2/openapi.json): an array of rows with an identity row, filters, 304s, errors.
func TestFrankfurterV2(t *testing.T) {
	s := start(t)
	resp, body := get(t, s.URL()+FrankfurterV2Path+"?base=EUR", nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, `[{"date":"2026-05-15","base":"EUR","quote":"EUR","rate":1.0},`+
		`{"date":"2026-05-15","base":"EUR","quote":"JPY","rate":171.58},`+
		`{"date":"2026-05-15","base":"EUR","quote":"USD","rate":1.1625}]`, body)
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	resp, _ = get(t, s.URL()+FrankfurterV2Path+"?base=EUR", map[string]string{"If-None-Match": etag})
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)

	_, body = get(t, s.URL()+FrankfurterV2Path+"?base=usd&quotes=jpy,eur", nil)
	var rows []struct {
		Base, Quote string
		Rate        float64
	}
	require.NoError(t, json.Unmarshal([]byte(body), &rows))
	assert.Equal(t, []struct {
		Base, Quote string
		Rate        float64
	}{{"USD", "EUR", 0.86022}, {"USD", "JPY", 147.6}}, rows, "parameters are upper-cased; cross rates to five digits")

	_, body = get(t, s.URL()+FrankfurterV2Path+"?providers=ecb", nil)
	assert.Contains(t, body, `"quote":"USD"`, "provider ECB publishes the table")
	_, body = get(t, s.URL()+FrankfurterV2Path+"?providers=FED", nil)
	assert.Equal(t, "[]", body, "a provider that publishes nothing: an empty list")
	s.SetProviders("FED")
	_, body = get(t, s.URL()+FrankfurterV2Path+"?providers=FED", nil)
	assert.Contains(t, body, `"quote":"USD"`)

	for q, want := range map[string]string{
		"?symbols=USD":     `{"status":422,"message":"unknown parameter: symbols"}`,
		"?quotes=US":       `{"status":422,"message":"invalid currency: US"}`,
		"?date=2026-01-02": `{"status":422,"message":"the imitation upstream serves only the latest rates, without date"}`,
	} {
		resp, body := get(t, s.URL()+FrankfurterV2Path+q, nil)
		assert.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, q)
		assert.JSONEq(t, want, body, q)
	}
	resp, body = get(t, s.URL()+"/v2/nothing", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.JSONEq(t, `{"status":404,"message":"not found"}`, body)
	assert.Equal(t, 9, s.Requests(FrankfurterV2Path))
}

func TestFailures(t *testing.T) {
	s := start(t)
	s.Fail(ServerError, 0)
	resp, body := get(t, s.URL()+ECBPath, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, body, "503 Service Unavailable")

	s.Fail(ServerError, http.StatusBadGateway)
	resp, _ = get(t, s.URL()+FrankfurterPath, nil)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode)

	s.Fail(Garbage, 0)
	resp, body = get(t, s.URL()+ECBPath, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotContains(t, body, "Envelope")

	s.Fail(Incomplete, 0)
	resp, body = get(t, s.URL()+ECBPath, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotContains(t, body, "</gesmes:Envelope>")
	assert.Contains(t, body, "<gesmes:Envelope")

	s.Fail(Truncated, 0)
	resp, err := http.Get(s.URL() + ECBPath)
	require.NoError(t, err)
	_, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)

	s.Heal()
	s.SetDelay(300 * time.Millisecond)
	start := time.Now()
	resp, _ = get(t, s.URL()+ECBPath, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Equal(t, 6, s.Requests(""))
}
