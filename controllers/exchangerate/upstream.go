package exchangerate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// The upstreams and their HTTP clients (docs/exchangerate.md, "Sources").

// Source types, as spec.sources[].type and --exchangerate-source name them.
const (
	SourceECB           = string(operatorsv1.SourceTypeECB)
	SourceFrankfurter   = string(operatorsv1.SourceTypeFrankfurter)
	SourceFrankfurterV2 = string(operatorsv1.SourceTypeFrankfurterV2)
)

// Default base URLs and the paths appended to them (a mirror serves the same paths).
const (
	DefaultECBURL         = "https://www.ecb.europa.eu"
	DefaultFrankfurterURL = "https://api.frankfurter.dev"
	ECBPath               = "/stats/eurofxref/eurofxref-daily.xml"
	FrankfurterPath       = "/v1/latest"
	FrankfurterV2Path     = "/v2/rates"
	// maxBody bounds what we read from an upstream: the daily ECB file is about 1.5 KiB.
	maxBody = 1 << 20
)

// SourceRef names one upstream: a type and, for frankfurter-v2, an optional provider.
type SourceRef struct {
	Type, Provider string
}

// String is the source's name everywhere: the type, or type:PROVIDER.
func (r SourceRef) String() string {
	if r.Provider == "" {
		return r.Type
	}
	return r.Type + ":" + r.Provider
}

// provider is the CRD's pattern of spec.sources[].provider, checked again for flags.
var provider = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,15}(\.[A-Z0-9]{1,8})?$`)

// ParseSourceRef reads a source name as String writes it.
func ParseSourceRef(name string) (SourceRef, error) {
	typ, prov, withProvider := strings.Cut(strings.TrimSpace(name), ":")
	switch {
	case withProvider && prov == "":
		return SourceRef{}, fmt.Errorf("exchange rate source %q: the provider after the colon is missing", name)
	case typ != SourceECB && typ != SourceFrankfurter && typ != SourceFrankfurterV2:
		return SourceRef{}, fmt.Errorf("unknown exchange rate source %q (want %s, %s or %s)", name, SourceECB, SourceFrankfurter, SourceFrankfurterV2)
	case prov != "" && typ != SourceFrankfurterV2:
		return SourceRef{}, fmt.Errorf("exchange rate source %q: only %s takes a provider", name, SourceFrankfurterV2)
	case prov != "" && !provider.MatchString(prov):
		return SourceRef{}, fmt.Errorf("exchange rate source %q: provider %q is not an upper-case provider key such as ECB", name, prov)
	}
	return SourceRef{Type: typ, Provider: prov}, nil
}

// scheduleOf is when the source publishes: the ECB's rates on its schedule, others never known.
func scheduleOf(r SourceRef) Schedule {
	switch {
	case r.Type == SourceECB:
		return ecbSchedule()
	case r.Type == SourceFrankfurter, r.Type == SourceFrankfurterV2 && r.Provider == "ECB":
		return frankfurterECBSchedule()
	}
	return Schedule{}
}

// Source is one upstream: Fetch returns prev itself when unchanged (a conditional request).
type Source interface {
	Name() string
	Fetch(ctx context.Context, prev *Table) (*Table, error)
}

// sourceSchedule is s's publication schedule (its Schedule method); zero when it has none.
func sourceSchedule(s Source) Schedule {
	if sc, ok := s.(interface{ Schedule() Schedule }); ok {
		return sc.Schedule()
	}
	return Schedule{}
}

// FetchError says why a fetch gave no table. Reason is the condition reason.
type FetchError struct {
	Reason string
	Err    error
}

func (e *FetchError) Error() string { return e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// fetchResults are the failures' metric labels; any other reason's is "malformed".
var fetchResults = map[string]string{
	operatorsv1.ReasonUpstreamServerError: "server_error",
	operatorsv1.ReasonUpstreamRejected:    "rejected",
	operatorsv1.ReasonUpstreamTimeout:     "timeout",
	operatorsv1.ReasonUpstreamUnreachable: "unreachable",
}

func (e *FetchError) result() string { return cmp.Or(fetchResults[e.Reason], "malformed") }

func fetchErr(reason, format string, args ...any) *FetchError {
	return &FetchError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// NewSource returns the named source reading from baseURL (empty: the public default).
func NewSource(name, baseURL string, client *http.Client) (Source, error) {
	ref, err := ParseSourceRef(name)
	if err != nil {
		return nil, err
	}
	s := &httpSource{name: ref.String(), schedule: scheduleOf(ref), client: client, base: DefaultFrankfurterURL,
		accept: "application/json", errorMessage: frankfurterMessage}
	switch ref.Type {
	case SourceECB:
		s.path, s.accept, s.parse, s.base, s.errorMessage = ECBPath, "application/xml, text/xml", ParseECB, DefaultECBURL, nil
	case SourceFrankfurter:
		s.path, s.parse = FrankfurterPath+"?base=EUR", ParseFrankfurter
	case SourceFrankfurterV2:
		q := url.Values{"base": {euro}}
		s.parse = ParseFrankfurterV2
		if ref.Provider != "" {
			q.Set("providers", ref.Provider)
			s.parse = func(b []byte) (*Table, error) {
				t, err := ParseFrankfurterV2(b)
				if errors.Is(err, errNoRates) {
					// Frankfurter answers an unknown provider with an empty list.
					return nil, fmt.Errorf("%w; is %s one of the providers /v2/providers lists?", err, ref.Provider)
				}
				return t, err
			}
		}
		s.path = FrankfurterV2Path + "?" + q.Encode()
	}
	if baseURL != "" {
		if err := checkBaseURL(baseURL); err != nil {
			return nil, err
		}
		s.base = baseURL
	}
	s.url = strings.TrimSuffix(s.base, "/") + s.path
	return s, nil
}

// checkBaseURL refuses a base URL that is not http(s), has a query or carries credentials,
// and never echoes a credential or a query (a token): errors land in logs.
func checkBaseURL(baseURL string) error {
	u, err := url.Parse(baseURL)
	switch {
	case err == nil && u.User != nil:
		// Flags show in the pod spec and the process list: a credential there is in plain text.
		return fmt.Errorf("exchange rate URL for %s carries credentials (user:password@); a flag is no place for a secret: "+
			"use a mirror that needs none, reachable only from the cluster", u.Host)
	case err != nil:
		return fmt.Errorf("exchange rate URL is not a URL: %w", err)
	case (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "":
		return fmt.Errorf("exchange rate URL %q is not an http(s) base URL (no query: the source's path and query are appended)", u.Scheme+"://"+u.Host+u.Path)
	}
	return nil
}

// httpSource fetches and parses one document with conditional GETs.
type httpSource struct {
	name, base, path, url, accept string
	client                        *http.Client
	parse                         func([]byte) (*Table, error)
	errorMessage                  func([]byte) string // the upstream's explanation in a 4xx body, if it has one
	schedule                      Schedule
}

func (s *httpSource) Name() string       { return s.name }
func (s *httpSource) Schedule() Schedule { return s.schedule }

func (s *httpSource) Fetch(ctx context.Context, prev *Table) (*Table, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fetchErr(operatorsv1.ReasonUpstreamUnreachable, "building request for %s: %v", s.url, err)
	}
	req.Header.Set("Accept", s.accept)
	req.Header.Set("User-Agent", "quartet-exchangerate")
	if prev != nil && prev.ETag != "" {
		req.Header.Set("If-None-Match", prev.ETag)
	}
	if prev != nil && prev.LastModified != "" {
		req.Header.Set("If-Modified-Since", prev.LastModified)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, transportError(s.url, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		_ = resp.Body.Close()
	}()
	if err := s.refused(resp, prev); err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotModified {
		return prev, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, transportError(s.url, err)
	}
	if len(body) > maxBody {
		return nil, fetchErr(operatorsv1.ReasonUpstreamMalformed, "%s sent more than %d bytes", s.url, maxBody)
	}
	t, err := s.parse(body)
	if err != nil {
		return nil, &FetchError{Reason: operatorsv1.ReasonUpstreamMalformed, Err: fmt.Errorf("%s: %w", s.url, err)}
	}
	t.Source, t.ETag, t.LastModified = s.name, resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	return t, nil
}

// refused is the *FetchError of an answer other than 200 or a 304 to a conditional request.
func (s *httpSource) refused(resp *http.Response, prev *Table) error {
	switch {
	case resp.StatusCode == http.StatusNotModified && prev == nil:
		return fetchErr(operatorsv1.ReasonUpstreamMalformed, "%s answered 304 Not Modified to an unconditional request", s.url)
	case resp.StatusCode == http.StatusNotModified, resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode >= 500:
		return fetchErr(operatorsv1.ReasonUpstreamServerError, "%s answered %s", s.url, resp.Status)
	case resp.StatusCode >= 400:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg := ""
		if s.errorMessage != nil && s.errorMessage(body) != "" {
			msg = ": " + s.errorMessage(body)
		}
		return fetchErr(operatorsv1.ReasonUpstreamRejected, "%s answered %s%s", s.url, resp.Status, msg)
	}
	return fetchErr(operatorsv1.ReasonUpstreamMalformed, "%s answered %s, want 200", s.url, resp.Status)
}

// transportError classifies a failed request or body read.
func transportError(u string, err error) *FetchError {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fetchErr(operatorsv1.ReasonUpstreamTimeout, "%s did not answer in time: %v", u, err)
	}
	return fetchErr(operatorsv1.ReasonUpstreamUnreachable, "reading %s: %v", u, err)
}

// sourceURL is the document s fetches, for the log; "" for a Source that is not HTTP.
func sourceURL(s Source) string {
	if h, ok := s.(*httpSource); ok {
		return h.url
	}
	return ""
}
