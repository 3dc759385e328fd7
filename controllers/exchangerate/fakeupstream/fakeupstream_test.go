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
