// Package benchutil holds what the benchmarks share: the raw-create baseline (a tuned
// client-go loop writing objects as fast as the API server takes them, the physical limit
// a controller that writes objects can approach) and a transport that counts API calls.
package benchutil

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Workers is the parallelism of the raw baseline.
const Workers = 32

// TunedConfig returns a copy of cfg with client-side rate limiting out of the way.
func TunedConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5000, 10000
	return c
}

// CreateNamespaces creates n namespaces named prefix-0 … prefix-(n-1) and returns their names.
func CreateNamespaces(ctx context.Context, cs kubernetes.Interface, prefix string, n int) ([]string, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	err := Parallel(ctx, n, func(i int) error {
		_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
		return err
	})
	return names, err
}

// Parallel runs fn(0..n-1) on Workers goroutines and returns the first error.
func Parallel(ctx context.Context, n int, fn func(i int) error) error {
	var (
		next     atomic.Int64
		firstErr error
		once     sync.Once
		wg       sync.WaitGroup
	)
	for w := 0; w < Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// Payload returns a data map of roughly size bytes.
func Payload(size int) map[string]string {
	return map[string]string{"payload": strings.Repeat("x", size)}
}

// RawCreateConfigMaps creates one ConfigMap named name with a payload of size bytes in
// every namespace and returns how long it took.
func RawCreateConfigMaps(ctx context.Context, cs kubernetes.Interface, namespaces []string, name string, size int) (time.Duration, error) {
	start := time.Now()
	err := Parallel(ctx, len(namespaces), func(i int) error {
		_, err := cs.CoreV1().ConfigMaps(namespaces[i]).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Data: Payload(size)}, metav1.CreateOptions{})
		return err
	})
	return time.Since(start), err
}

// RawCreateSecrets creates one Secret named name with a payload of size bytes in every
// namespace and returns how long it took.
func RawCreateSecrets(ctx context.Context, cs kubernetes.Interface, namespaces []string, name string, size int) (time.Duration, error) {
	start := time.Now()
	err := Parallel(ctx, len(namespaces), func(i int) error {
		_, err := cs.CoreV1().Secrets(namespaces[i]).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name}, StringData: Payload(size)}, metav1.CreateOptions{})
		return err
	})
	return time.Since(start), err
}

// CallCounter counts the requests that pass through a rest.Config, by verb and resource
// path, so benchmarks can report API calls per unit of work.
type CallCounter struct {
	mu     sync.Mutex
	counts map[string]int
	// windows holds, per resource (ResourceOf), when the first write (POST, PUT, PATCH,
	// DELETE) since the last Reset was sent and when the last one's response came back.
	windows map[string]*[2]time.Time
}

// Wrap makes cfg count its requests in c.
func (c *CallCounter) Wrap(cfg *rest.Config) {
	c.mu.Lock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.mu.Unlock()
	prev := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			w := c.count(req)
			resp, err := rt.RoundTrip(req)
			if w != nil {
				c.mu.Lock()
				w[1] = time.Now()
				c.mu.Unlock()
			}
			return resp, err
		})
	}
}

// count records one request and, for a write, returns its resource's write window.
func (c *CallCounter) count(req *http.Request) *[2]time.Time {
	verb := req.Method
	if w := req.URL.Query().Get("watch"); w == "true" || w == "1" {
		verb = "WATCH"
	}
	write := verb == http.MethodPost || verb == http.MethodPut || verb == http.MethodPatch || verb == http.MethodDelete
	c.mu.Lock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[verb+" "+req.URL.Path]++
	var w *[2]time.Time
	if write {
		if c.windows == nil {
			c.windows = map[string]*[2]time.Time{}
		}
		res := ResourceOf(req.URL.Path)
		if w = c.windows[res]; w == nil {
			w = &[2]time.Time{time.Now()}
			c.windows[res] = w
		}
	}
	c.mu.Unlock()
	return w
}

// Reset forgets every count and the write window.
func (c *CallCounter) Reset() {
	c.mu.Lock()
	c.counts = map[string]int{}
	c.windows = nil
	c.mu.Unlock()
}

// WriteWindow returns when the first write of resource (as ResourceOf names it: "secrets",
// "copyratorrules/status") since the last Reset was sent and when the last one's response
// came back; zero times when there was none.
func (c *CallCounter) WriteWindow(resource string) (first, lastDone time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.windows[resource]; w != nil {
		return w[0], w[1]
	}
	return time.Time{}, time.Time{}
}

// Snapshot returns a copy of the counts, keyed by "VERB /path".
func (c *CallCounter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// Total returns the number of requests whose verb is one of verbs (all when none given).
func (c *CallCounter) Total(verbs ...string) int {
	n := 0
	for k, v := range c.Snapshot() {
		verb := strings.SplitN(k, " ", 2)[0]
		if len(verbs) == 0 {
			n += v
			continue
		}
		for _, want := range verbs {
			if verb == want {
				n += v
			}
		}
	}
	return n
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ResourceOf returns the resource (with its subresource) a request path names:
// /apis/events.k8s.io/v1/namespaces/a/events → events,
// /apis/apps/v1/namespaces/ns/statefulsets/x/status → statefulsets/status.
func ResourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return path
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	switch len(parts) {
	case 0:
		return path
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

// IsReview tells the resources a POST to only asks the API server a question and changes
// nothing: authentication's TokenReviews and authorization's access reviews (a
// controller checking what someone may do, the metrics endpoint checking its caller). A
// benchmark counting writes counts these apart.
func IsReview(resource string) bool {
	switch resource {
	case "tokenreviews", "subjectaccessreviews", "localsubjectaccessreviews", "selfsubjectaccessreviews",
		"selfsubjectrulesreviews", "selfsubjectreviews":
		return true
	}
	return false
}

// Sum adds up the values of a map (CPU seconds per process, requests per kind).
func Sum[K comparable, V int | float64](m map[K]V) V {
	var t V
	for _, v := range m {
		t += v
	}
	return t
}
