// Package fakeupstream imitates the exchange rate upstreams on a local HTTP server, for
// tests, benchmarks and the demo cluster (which has no internet): the ECB daily reference
// rates XML at /stats/eurofxref/eurofxref-daily.xml, the Frankfurter v1 JSON API at
// /v1/latest and the Frankfurter v2 JSON API at /v2/rates. All are rendered from one
// configurable table of rates per 1 EUR, carry an ETag and Last-Modified and answer
// conditional requests with 304, and can be made to fail: 5xx, slow answers, garbage or
// truncated bodies. Every request is counted.
//
// The rates it serves are made up. Nothing here reaches the internet.
package fakeupstream

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Paths served, the same as the real upstreams'.
const (
	ECBPath           = "/stats/eurofxref/eurofxref-daily.xml"
	FrankfurterPath   = "/v1/latest"
	FrankfurterV2Path = "/v2/rates"
)

// Failure is how the server misbehaves.
type Failure int

const (
	// Healthy answers normally.
	Healthy Failure = iota
	// ServerError answers with the configured 5xx status and an HTML body.
	ServerError
	// Garbage answers 200 with a body that is neither XML nor JSON.
	Garbage
	// Truncated answers 200, declares the full Content-Length and sends half the body.
	Truncated
	// Incomplete answers 200 with the first half of the document, cleanly ended.
	Incomplete
)

// DefaultRates are 29 currencies priced in EUR at made-up but plausible levels, the
// currencies the ECB lists.
func DefaultRates() map[string]string {
	return map[string]string{
		"USD": "1.1625", "JPY": "171.58", "CZK": "24.482", "DKK": "7.4642", "GBP": "0.86485",
		"HUF": "390.35", "PLN": "4.2468", "RON": "5.0722", "SEK": "11.0515", "CHF": "0.9343",
		"ISK": "142.60", "NOK": "11.7730", "TRY": "48.3110", "AUD": "1.7650", "BRL": "6.2754",
		"CAD": "1.6178", "CNY": "8.2926", "HKD": "9.0421", "IDR": "19254.12", "ILS": "3.8864",
		"INR": "101.8735", "KRW": "1654.80", "MXN": "21.5316", "MYR": "4.8934", "NZD": "2.0143",
		"PHP": "66.342", "SGD": "1.4962", "THB": "37.612", "ZAR": "20.4321",
	}
}

// Server is the imitation upstream. The zero value is not usable; call New or Start.
type Server struct {
	mu         sync.Mutex
	date       string
	rates      map[string]string
	modTime    time.Time
	failure    Failure
	failStatus int
	delay      time.Duration
	requests   map[string]int
	notMod     int
	// providers are the Frankfurter v2 provider keys that publish the table.
	providers []string

	listener net.Listener
	scheme   string // "https" when started by StartTLS
	srv      *http.Server
}

// New returns a server (not listening) that publishes rates (units per 1 EUR, decimal
// strings) dated date (YYYY-MM-DD).
func New(date string, rates map[string]string) *Server {
	s := &Server{requests: map[string]int{}, providers: []string{"ECB"}}
	s.SetRates(date, rates)
	return s
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves until Close.
func Start(addr, date string, rates map[string]string) (*Server, error) {
	s := New(date, rates)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.listener = l
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// StartTLS is Start over HTTPS with the certificate and key files given.
func StartTLS(addr, date string, rates map[string]string, certFile, keyFile string) (*Server, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	s := New(date, rates)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.listener, s.scheme = l, "https"
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = s.srv.ServeTLS(l, "", "") }()
	return s, nil
}

// URL is the base URL to give the controller (--exchangerate-url).
func (s *Server) URL() string {
	scheme := s.scheme
	if scheme == "" {
		scheme = "http"
	}
	return scheme + "://" + s.listener.Addr().String()
}

// Close stops the server and cuts open connections (slow answers included).
func (s *Server) Close() error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Close()
}

// SetRates publishes a new table; ETag and Last-Modified change with it.
func (s *Server) SetRates(date string, rates map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.date = date
	s.rates = make(map[string]string, len(rates))
	for k, v := range rates {
		s.rates[k] = v
	}
	// Last-Modified has one-second resolution; make sure a new table gets a new one.
	t := time.Now().UTC().Truncate(time.Second)
	if !t.After(s.modTime) {
		t = s.modTime.Add(time.Second)
	}
	s.modTime = t
}

// SetProviders names the Frankfurter v2 providers whose rates the table is (default ECB):
// /v2/rates?providers=… naming none of them answers an empty list, as Frankfurter does for
// a provider it does not know.
func (s *Server) SetProviders(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.providers = slices.Clone(keys)
}

// Fail makes every following request fail as f; status is used by ServerError (0: 503).
func (s *Server) Fail(f Failure, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if status == 0 {
		status = http.StatusServiceUnavailable
	}
	s.failure, s.failStatus = f, status
}

// Heal ends any failure and delay.
func (s *Server) Heal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure, s.delay = Healthy, 0
}

// SetDelay makes every answer wait d first (0: none).
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Requests returns how many requests reached path (any path when empty).
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if path != "" {
		return s.requests[path]
	}
	n := 0
	for _, c := range s.requests {
		n += c
	}
	return n
}

// NotModified returns how many requests were answered 304.
func (s *Server) NotModified() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.notMod
}

// ResetCounts forgets the request counts.
func (s *Server) ResetCounts() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests, s.notMod = map[string]int{}, 0
}

var code = regexp.MustCompile(`^[A-Z]{3}$`)

// ServeHTTP serves both upstreams.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests[r.URL.Path]++
	date, rates, modTime, providers := s.date, s.rates, s.modTime, s.providers
	failure, status, delay := s.failure, s.failStatus, s.delay
	s.mu.Unlock()

	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}

	var body []byte
	var contentType string
	switch r.URL.Path {
	case ECBPath:
		body, contentType = RenderECB(date, rates), "text/xml"
	case FrankfurterPath:
		var errStatus int
		var msg string
		body, errStatus, msg = renderFrankfurter(date, rates, r.URL.Query().Get("base"), r.URL.Query().Get("symbols"))
		if errStatus != 0 {
			writeJSONError(w, errStatus, msg)
			return
		}
		contentType = "application/json"
	case FrankfurterV2Path:
		var errStatus int
		var msg string
		body, errStatus, msg = renderFrankfurterV2(date, rates, providers, r.URL.Query())
		if errStatus != 0 {
			writeJSONErrorV2(w, errStatus, msg)
			return
		}
		contentType = "application/json; charset=utf-8"
	default:
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			writeJSONError(w, http.StatusNotFound, "not found")
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v2/") {
			writeJSONErrorV2(w, http.StatusNotFound, "not found")
			return
		}
		http.NotFound(w, r)
		return
	}

	switch failure {
	case ServerError:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(status)
		fmt.Fprintf(w, "<html><body><h1>%d %s</h1></body></html>\n", status, http.StatusText(status))
		return
	case Garbage:
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write([]byte("\x00\x01<<<this is not the document you are looking for}}}\xff"))
		return
	case Truncated:
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(body[:len(body)/2])
		return // the server closes the connection: the client sees an unexpected EOF
	case Incomplete:
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body[:len(body)/2])
		return
	}

	sum := sha256.Sum256(body)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:8])+`"`)
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	// ServeContent answers If-None-Match (which wins) and If-Modified-Since with 304.
	rec := &statusRecorder{ResponseWriter: w}
	http.ServeContent(rec, r, "", modTime, bytes.NewReader(body))
	if rec.status == http.StatusNotModified {
		s.mu.Lock()
		s.notMod++
		s.mu.Unlock()
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"message\":%q}\n", msg)
}

// writeJSONErrorV2 answers like Frankfurter v2: {"status":…,"message":…}.
func writeJSONErrorV2(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "{\"status\":%d,\"message\":%q}\n", status, msg)
}

// RenderECB renders rates as the ECB's eurofxref-daily.xml, with its namespaces and
// single-quoted attributes; currencies sorted by code.
func RenderECB(date string, rates map[string]string) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<gesmes:Envelope xmlns:gesmes="http://www.gesmes.org/xml/2002-08-01" xmlns="http://www.ecb.int/vocabulary/2002-08-01/eurofxref">
	<gesmes:subject>Reference rates</gesmes:subject>
	<gesmes:Sender>
		<gesmes:name>European Central Bank</gesmes:name>
	</gesmes:Sender>
	<Cube>
`)
	fmt.Fprintf(&b, "\t\t<Cube time='%s'>\n", date)
	for _, c := range sortedKeys(rates) {
		fmt.Fprintf(&b, "\t\t\t<Cube currency='%s' rate='%s'/>\n", c, rates[c])
	}
	b.WriteString("\t\t</Cube>\n\t</Cube>\n</gesmes:Envelope>\n")
	return b.Bytes()
}

// perEuro is currency c's units per euro in rates (EUR itself is 1); false when c is not
// in the table.
func perEuro(rates map[string]string, c string) (*big.Rat, bool) {
	if c == "EUR" {
		return big.NewRat(1, 1), true
	}
	v, ok := rates[c]
	if !ok {
		return nil, false
	}
	return new(big.Rat).SetString(v)
}

// renderFrankfurter answers /v1/latest?base=…&symbols=… like Frankfurter: rates against
// another base are cross rates rounded to five significant digits; an unknown base or
// symbol is 404 {"message":"not found"}, a malformed one 422.
func renderFrankfurter(date string, rates map[string]string, base, symbols string) ([]byte, int, string) {
	if base == "" {
		base = "EUR"
	}
	if !code.MatchString(base) {
		return nil, http.StatusUnprocessableEntity, "invalid base"
	}
	b, ok := perEuro(rates, base)
	if !ok {
		return nil, http.StatusNotFound, "not found"
	}
	wanted := []string{}
	if symbols != "" {
		for _, c := range strings.Split(symbols, ",") {
			if !code.MatchString(c) {
				return nil, http.StatusUnprocessableEntity, "invalid symbols"
			}
			if _, ok := perEuro(rates, c); !ok {
				return nil, http.StatusNotFound, "not found"
			}
			wanted = append(wanted, c)
		}
	} else {
		wanted = append(sortedKeys(rates), "EUR")
	}
	slices.Sort(wanted)
	wanted = slices.Compact(wanted)

	var out bytes.Buffer
	fmt.Fprintf(&out, `{"amount":1.0,"base":%q,"date":%q,"rates":{`, base, date)
	first := true
	for _, c := range wanted {
		if c == base {
			continue
		}
		var num string
		if base == "EUR" {
			num = rates[c]
		} else {
			r, _ := perEuro(rates, c)
			f, _ := new(big.Rat).Quo(r, b).Float64()
			num = fmt.Sprintf("%.5g", f)
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&out, "%q:%s", c, num)
	}
	out.WriteString("}}")
	return out.Bytes(), 0, ""
}

// v2Params are the query parameters Frankfurter v2's /v2/rates accepts
// (lib/versions/v2/rate_query.rb, ALLOWED_PARAMS); any other is 422 "unknown parameter".
var v2Params = []string{"base", "quotes", "providers", "date", "from", "to", "group", "expand"}

// renderFrankfurterV2 answers /v2/rates for the latest rates like Frankfurter v2: a JSON
// array of {"date","base","quote","rate"} rows sorted by quote, the base's identity row
// (rate 1) included; base (default EUR), quotes and providers (upper-cased, as Frankfurter
// does) filter it. Rates against another base are cross rates rounded to five significant
// digits. A providers list naming none of the table's providers gives an empty array; an
// unknown parameter or currency is 422. History (date, from, to, group) and expand are
// not imitated: 422.
func renderFrankfurterV2(date string, rates map[string]string, providers []string, q url.Values) ([]byte, int, string) {
	for k := range q {
		if !slices.Contains(v2Params, k) {
			return nil, http.StatusUnprocessableEntity, "unknown parameter: " + k
		}
		if k != "base" && k != "quotes" && k != "providers" {
			return nil, http.StatusUnprocessableEntity, "the imitation upstream serves only the latest rates, without " + k
		}
	}
	base := strings.ToUpper(q.Get("base"))
	if base == "" {
		base = "EUR"
	}
	var wanted []string
	if quotes := q.Get("quotes"); quotes != "" {
		for _, c := range strings.Split(strings.ToUpper(quotes), ",") {
			if !code.MatchString(c) {
				return nil, http.StatusUnprocessableEntity, "invalid currency: " + c
			}
			wanted = append(wanted, c)
		}
	}
	if !code.MatchString(base) {
		return nil, http.StatusUnprocessableEntity, "invalid currency: " + base
	}
	b, known := perEuro(rates, base)
	published := true
	if p := q.Get("providers"); p != "" {
		published = false
		for _, key := range strings.Split(strings.ToUpper(p), ",") {
			published = published || slices.Contains(providers, key)
		}
	}
	if !published || !known {
		return []byte("[]"), 0, ""
	}

	all := append(sortedKeys(rates), "EUR")
	slices.Sort(all)
	var out bytes.Buffer
	out.WriteByte('[')
	first := true
	for _, c := range all {
		if wanted != nil && !slices.Contains(wanted, c) {
			continue
		}
		var num string
		switch {
		case c == base:
			num = "1.0"
		case base == "EUR":
			num = rates[c]
		default:
			r, _ := perEuro(rates, c)
			f, _ := new(big.Rat).Quo(r, b).Float64()
			num = fmt.Sprintf("%.5g", f)
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		fmt.Fprintf(&out, `{"date":%q,"base":%q,"quote":%q,"rate":%s}`, date, base, c, num)
	}
	out.WriteByte(']')
	return out.Bytes(), 0, ""
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
