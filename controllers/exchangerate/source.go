package exchangerate

import (
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

// Source types, as spec.sources[].type and --exchangerate-source name them.
const (
	SourceECB           = string(operatorsv1.SourceTypeECB)
	SourceFrankfurter   = string(operatorsv1.SourceTypeFrankfurter)
	SourceFrankfurterV2 = string(operatorsv1.SourceTypeFrankfurterV2)
)

// Default base URLs and the paths appended to them. A mirror given with
// --exchangerate-ecb-url, --exchangerate-frankfurter-url or --exchangerate-url serves the
// same paths.
//
// Frankfurter v2 (https://frankfurter.dev, OpenAPI at https://api.frankfurter.dev/v2/openapi.json;
// source lineofflight/frankfurter, lib/versions/v2.rb and lib/public/v2/openapi.json): GET
// /v2/rates answers the latest rates as a JSON array of rows {"date","base","quote","rate"},
// one per currency, each dated by its own latest observation, plus an identity row for the
// base (rate 1). Query parameters: base (default EUR), quotes, providers (comma-separated
// provider keys such as ECB; without it the rates are a blend of all providers), date,
// from/to, group, expand. It sends an ETag and answers If-None-Match with 304; errors are
// {"status":…, "message":…} with 404 or 422 (an unknown parameter or currency). An unknown
// provider yields an empty array. v1 (/v1/latest) is frozen ("status": "frozen" at /v1).
const (
	DefaultECBURL         = "https://www.ecb.europa.eu"
	DefaultFrankfurterURL = "https://api.frankfurter.dev"
	ECBPath               = "/stats/eurofxref/eurofxref-daily.xml"
	FrankfurterPath       = "/v1/latest"
	FrankfurterV2Path     = "/v2/rates"
)

// SourceRef names one upstream: a type and, for frankfurter-v2, an optional provider. Each
// distinct SourceRef is one table and one upstream request per refresh, shared by every
// ExchangeRate that names it.
type SourceRef struct {
	Type, Provider string
}

// String is the source's name in status, ConfigMaps, metrics and flags: the type, or
// type:PROVIDER (frankfurter-v2:ECB).
func (r SourceRef) String() string {
	if r.Provider == "" {
		return r.Type
	}
	return r.Type + ":" + r.Provider
}

// provider is what spec.sources[].provider accepts (the CRD's pattern, checked again here
// for flags).
var provider = regexp.MustCompile(`^[A-Z][A-Z0-9]{1,15}(\.[A-Z0-9]{1,8})?$`)

// ParseSourceRef reads a source name as String writes it.
func ParseSourceRef(name string) (SourceRef, error) {
	typ, prov, withProvider := strings.Cut(strings.TrimSpace(name), ":")
	r := SourceRef{Type: typ, Provider: prov}
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
	return r, nil
}

// refOf is the SourceRef of a spec's source.
func refOf(s operatorsv1.ExchangeRateSource) SourceRef {
	return SourceRef{Type: string(s.Type), Provider: s.Provider}
}

// scheduleOf is when the source publishes: the ECB's rates (directly, through Frankfurter's
// v1, or v2 from provider ECB) after the ECB's publication; Frankfurter's blend, or another
// provider's rates, at no time this controller knows.
func scheduleOf(r SourceRef) Schedule {
	switch {
	case r.Type == SourceECB:
		return ecbSchedule()
	case r.Type == SourceFrankfurter, r.Type == SourceFrankfurterV2 && r.Provider == "ECB":
		return frankfurterECBSchedule()
	}
	return Schedule{}
}

// maxBody bounds what we read from an upstream: the daily ECB file is about 1.5 KiB.
const maxBody = 1 << 20

// Source is one upstream of euro reference rates.
type Source interface {
	// Name is the source's name (ecb, frankfurter), used in status, ConfigMaps and metrics.
	Name() string
	// Fetch returns the current table. prev is the last good table or nil; its validators
	// make the request conditional, and an unchanged publication (304) returns prev itself.
	// Errors are *FetchError.
	Fetch(ctx context.Context, prev *Table) (*Table, error)
}

// scheduled is a Source that publishes at known times.
type scheduled interface {
	Schedule() Schedule
}

// sourceSchedule is s's publication schedule; zero when it has none.
func sourceSchedule(s Source) Schedule {
	if sc, ok := s.(scheduled); ok {
		return sc.Schedule()
	}
	return Schedule{}
}

// Metric results that are not failures.
const (
	resultOK          = "ok"
	resultNotModified = "not_modified"
)

// FetchError says why a fetch gave no table. Reason is the condition reason.
type FetchError struct {
	Reason string
	Err    error
}

func (e *FetchError) Error() string { return e.Err.Error() }
func (e *FetchError) Unwrap() error { return e.Err }

// result is the metric label of the failure.
func (e *FetchError) result() string {
	switch e.Reason {
	case operatorsv1.ReasonUpstreamServerError:
		return "server_error"
	case operatorsv1.ReasonUpstreamRejected:
		return "rejected"
	case operatorsv1.ReasonUpstreamTimeout:
		return "timeout"
	case operatorsv1.ReasonUpstreamUnreachable:
		return "unreachable"
	default:
		return "malformed"
	}
}

func fetchErr(reason, format string, args ...any) *FetchError {
	return &FetchError{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// NewSource returns the named source (a SourceRef's String) reading from baseURL (empty:
// the public default) through client.
func NewSource(name, baseURL string, client *http.Client) (Source, error) {
	ref, err := ParseSourceRef(name)
	if err != nil {
		return nil, err
	}
	var s *httpSource
	switch ref.Type {
	case SourceECB:
		s = &httpSource{path: ECBPath, accept: "application/xml, text/xml", parse: ParseECB, base: DefaultECBURL}
	case SourceFrankfurter:
		s = &httpSource{path: FrankfurterPath + "?base=EUR", accept: "application/json", parse: ParseFrankfurter,
			base: DefaultFrankfurterURL, errorMessage: frankfurterMessage}
	case SourceFrankfurterV2:
		q := url.Values{"base": {euro}}
		parse := ParseFrankfurterV2
		if ref.Provider != "" {
			q.Set("providers", ref.Provider)
			parse = func(b []byte) (*Table, error) {
				t, err := ParseFrankfurterV2(b)
				if errors.Is(err, errNoRates) {
					// Frankfurter answers an unknown provider with an empty list.
					return nil, fmt.Errorf("%w; is %s one of the providers /v2/providers lists?", err, ref.Provider)
				}
				return t, err
			}
		}
		s = &httpSource{path: FrankfurterV2Path + "?" + q.Encode(), accept: "application/json", parse: parse,
			base: DefaultFrankfurterURL, errorMessage: frankfurterMessage}
	}
	s.name, s.schedule = ref.String(), scheduleOf(ref)
	if baseURL != "" {
		u, err := url.Parse(baseURL)
		if err == nil && u.User != nil {
			// Never echo it: the error lands in logs. Flags show in the pod spec and the process
			// list, so a credential there is a credential in plain text.
			return nil, fmt.Errorf("exchange rate URL for %s carries credentials (user:password@); a flag is no place for a secret: "+
				"use a mirror that needs none, reachable only from the cluster", u.Host)
		}
		if err != nil {
			return nil, fmt.Errorf("exchange rate URL is not a URL: %w", err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			// Without the query: a token in it is a credential, and this error lands in logs.
			return nil, fmt.Errorf("exchange rate URL %q is not an http(s) base URL (no query: the source's path and query are appended)", u.Scheme+"://"+u.Host+u.Path)
		}
		s.base = baseURL
	}
	s.url = strings.TrimSuffix(s.base, "/") + s.path
	s.client = client
	return s, nil
}

// httpSource fetches and parses one document with conditional GETs.
type httpSource struct {
	name, base, path, url, accept string
	client                        *http.Client
	parse                         func([]byte) (*Table, error)
	// errorMessage extracts the upstream's explanation from a 4xx body, if it has one.
	errorMessage func([]byte) string
	schedule     Schedule
}

func (s *httpSource) Name() string { return s.name }

// Schedule is when the source publishes.
func (s *httpSource) Schedule() Schedule { return s.schedule }

// URL is the document the source fetches.
func (s *httpSource) URL() string { return s.url }

func (s *httpSource) Fetch(ctx context.Context, prev *Table) (*Table, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return nil, fetchErr(operatorsv1.ReasonUpstreamUnreachable, "building request for %s: %v", s.url, err)
	}
	req.Header.Set("Accept", s.accept)
	req.Header.Set("User-Agent", "quartet-exchangerate")
	if prev != nil {
		if prev.ETag != "" {
			req.Header.Set("If-None-Match", prev.ETag)
		}
		if prev.LastModified != "" {
			req.Header.Set("If-Modified-Since", prev.LastModified)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, transportError(s.url, err)
	}
	defer func() {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
		_ = resp.Body.Close()
	}()

	switch {
	case resp.StatusCode == http.StatusNotModified:
		if prev == nil {
			return nil, fetchErr(operatorsv1.ReasonUpstreamMalformed, "%s answered 304 Not Modified to an unconditional request", s.url)
		}
		return prev, nil
	case resp.StatusCode >= 500:
		return nil, fetchErr(operatorsv1.ReasonUpstreamServerError, "%s answered %s", s.url, resp.Status)
	case resp.StatusCode >= 400:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		msg := ""
		if s.errorMessage != nil {
			msg = s.errorMessage(body)
		}
		if msg != "" {
			return nil, fetchErr(operatorsv1.ReasonUpstreamRejected, "%s answered %s: %s", s.url, resp.Status, msg)
		}
		return nil, fetchErr(operatorsv1.ReasonUpstreamRejected, "%s answered %s", s.url, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return nil, fetchErr(operatorsv1.ReasonUpstreamMalformed, "%s answered %s, want 200", s.url, resp.Status)
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
	t.Source = s.name
	t.ETag = resp.Header.Get("ETag")
	t.LastModified = resp.Header.Get("Last-Modified")
	return t, nil
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
		return h.URL()
	}
	return ""
}
