package exchangerate

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quartet-operator/quartet/controllers/exchangerate/fakeupstream"
	"github.com/quartet-operator/quartet/internal/operator"
	"github.com/quartet-operator/quartet/test/benchutil"
	"github.com/quartet-operator/quartet/test/testenv"
)

// The benchmark runs on the package's full local cluster and measures its own raw-create
// baseline on the same API server in the same run.

const (
	benchRates      = 1000
	benchNamespaces = 100 // 10 ExchangeRates per namespace
	benchWorkers    = 16
	// benchRefresh is the refresh interval of the benchmark's manager: long enough that the
	// initial fill ends before the first refresh, short enough to wait for one.
	benchRefresh = 30 * time.Second
)

// benchPair is one of the 30 currencies the ExchangeRates price: the 29 the ECB
// publishes, against EUR, and EUR itself, against USD.
type benchPair struct{ currency, base string }

func benchPairs() []benchPair {
	var pairs []benchPair
	for c := range fakeupstream.DefaultRates() {
		pairs = append(pairs, benchPair{c, "EUR"})
	}
	sort.Slice(pairs, func(i, j int) bool { return pairs[i].currency < pairs[j].currency })
	return append(pairs, benchPair{"EUR", "USD"})
}

// BenchmarkExchangeRates1000 creates 1,000 ExchangeRates over 30 currencies and measures
// how long until every ConfigMap holds the right rate, against raw-creating 1,000
// ConfigMaps; it counts upstream requests for the initial fill and for one refresh that
// changes every rate.
func BenchmarkExchangeRates1000(b *testing.B) {
	env.Require(b)
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(benchutil.TunedConfig(env.Config))
	if err != nil {
		b.Fatal(err)
	}
	// ExchangeRates are created as fast as the baseline creates ConfigMaps.
	creator, err := client.New(benchutil.TunedConfig(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		b.Fatal(err)
	}
	id := rand.String(4)
	namespaces, err := benchutil.CreateNamespaces(ctx, cs, "xrbench-"+id, benchNamespaces)
	if err != nil {
		b.Fatal(err)
	}
	pairs := benchPairs()
	if len(pairs) != 30 {
		b.Fatalf("want 30 currencies, have %d", len(pairs))
	}

	for i := 0; i < b.N; i++ {
		// Baseline: 1,000 ConfigMaps, 10 per namespace, created by a tuned client-go loop.
		var raw time.Duration
		for j := 0; j < benchRates/benchNamespaces; j++ {
			d, err := benchutil.RawCreateConfigMaps(ctx, cs, namespaces, fmt.Sprintf("raw-%d-%d", i, j), 64)
			if err != nil {
				b.Fatal(err)
			}
			raw += d
		}

		srv, err := fakeupstream.Start("127.0.0.1:0", today(), fakeupstream.DefaultRates())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = srv.Close() })
		calls := &benchutil.CallCounter{}
		cfg := benchutil.TunedConfig(env.Config)
		calls.Wrap(cfg)
		opts := quickOptions(srv, benchRefresh)
		opts.MaxConcurrentReconciles = benchWorkers
		testenv.StartManager(b, cfg, operator.Shared{}, opts.Setup) // all namespaces, as without WATCH_NAMESPACE

		expect := func(rates map[string]string) map[string]map[string]string {
			tab := mustTable(b, "ecb", today(), rates)
			want := map[string]map[string]string{}
			for k := 0; k < benchRates; k++ {
				p := pairs[k%len(pairs)]
				r, err := tab.Rate(p.base, p.currency)
				if err != nil {
					b.Fatal(err)
				}
				want[fmt.Sprintf("%s/xr-%d-%d", namespaces[k%benchNamespaces], i, k)] = map[string]string{KeyRate: r, KeyCurrency: p.currency, KeyBase: p.base}
			}
			return want
		}

		// Fill: create the ExchangeRates, wait until every ConfigMap is right.
		want := expect(fakeupstream.DefaultRates())
		w := watchConfigMaps(b, cs)
		calls.Reset()
		start := time.Now()
		err = benchutil.Parallel(ctx, benchRates, func(k int) error {
			p := pairs[k%len(pairs)]
			return creator.Create(ctx, newXR(namespaces[k%benchNamespaces], fmt.Sprintf("xr-%d-%d", i, k), p.currency, p.base))
		})
		if err != nil {
			b.Fatal(err)
		}
		_, last := w.until(b, want, 2*time.Minute)
		fill := last.Sub(start)
		fillRequests := srv.Requests("")
		// Status writes trail the ConfigMaps; give them a moment before counting API writes.
		time.Sleep(2 * time.Second)
		writes := calls.Total("POST", "PATCH", "PUT")

		// Refresh: a new publication changes every rate; the next refresh must carry it to
		// all 1,000 ConfigMaps with one upstream request.
		newRates := map[string]string{}
		for c, r := range fakeupstream.DefaultRates() {
			newRates[c] = r + "7" // one more digit: every rate changes
		}
		srv.ResetCounts()
		srv.SetRates(today(), newRates)
		first, lastRefresh := w.until(b, expect(newRates), benchRefresh+2*time.Minute)
		refreshRequests := srv.Requests("")
		w.stop()

		b.ReportMetric(fill.Seconds(), "s-fill-1000-exchangerates")
		b.ReportMetric(raw.Seconds(), "s-raw-create-1000-configmaps")
		b.ReportMetric(fill.Seconds()/raw.Seconds(), "x-raw-create")
		b.ReportMetric(float64(fillRequests), "upstream-requests/fill-of-1000")
		b.ReportMetric(float64(refreshRequests), "upstream-requests/refresh")
		b.ReportMetric(lastRefresh.Sub(first).Seconds(), "s-refresh-spread-1000-configmaps")
		b.ReportMetric(float64(writes)/benchRates, "controller-api-writes/exchangerate")
	}
}

// cmWatch records when each ConfigMap of ours last reached its wanted data.
type cmWatch struct {
	w    watch.Interface
	data map[string]map[string]string // ns/name → last seen data
	at   map[string]time.Time
}

func watchConfigMaps(b *testing.B, cs kubernetes.Interface) *cmWatch {
	b.Helper()
	w, err := cs.CoreV1().ConfigMaps(metav1.NamespaceAll).Watch(context.Background(),
		metav1.ListOptions{LabelSelector: managedByLabel + "=" + managedByValue})
	if err != nil {
		b.Fatal(err)
	}
	return &cmWatch{w: w, data: map[string]map[string]string{}, at: map[string]time.Time{}}
}

func (cw *cmWatch) stop() { cw.w.Stop() }

// until consumes events until every ConfigMap in want holds its wanted keys; it returns
// when the first and the last of them got there.
func (cw *cmWatch) until(b *testing.B, want map[string]map[string]string, timeout time.Duration) (first, last time.Time) {
	b.Helper()
	matches := func(key string) bool {
		for k, v := range want[key] {
			if cw.data[key][k] != v {
				return false
			}
		}
		return true
	}
	done := map[string]time.Time{}
	for key := range want {
		if matches(key) {
			done[key] = cw.at[key]
		}
	}
	deadline := time.After(timeout)
	for len(done) < len(want) {
		select {
		case ev, ok := <-cw.w.ResultChan():
			if !ok {
				b.Fatal("ConfigMap watch closed")
			}
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if !isCM || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			key := cm.Namespace + "/" + cm.Name
			cw.data[key], cw.at[key] = cm.Data, time.Now()
			if _, ok := want[key]; ok && matches(key) {
				done[key] = cw.at[key]
			} else {
				delete(done, key)
			}
		case <-deadline:
			b.Fatalf("%d of %d ConfigMaps right after %s", len(done), len(want), timeout)
		}
	}
	for _, t := range done {
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}
