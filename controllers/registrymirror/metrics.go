package registrymirror

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/quartet-operator/quartet/internal/operator"
)

// Writes the controller makes to the children of mirrors, by kind and result. A steady
// cluster adds nothing here: passes that find a child up to date do not write.
var objectWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "quartet_registrymirror_object_writes_total",
	Help: "Writes to RegistryMirror children, by kind and result: server-side applies (created, updated, refused, failed), drift reverted (reverted), children deleted when no longer allowed or needed (deleted), and objects found owned by someone else (conflict).",
}, []string{"kind", "result"})

// readyGauge mirrors each RegistryMirror's Ready condition, so an alert can name the
// mirror that stopped serving: 1 when Ready is True, 0 otherwise (False or Unknown).
var readyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "quartet_registrymirror_ready",
	Help: "1 when the RegistryMirror's Ready condition is True, 0 when it is False or Unknown, by mirror.",
}, []string{"mirror_namespace", "mirror"})

// The images a mirror with node access pins (the cluster's pods run them from its host)
// and how many of them its registry holds whole, by mirror; no series without node access
// or before the registry reported. Alert QuartetRegistryMirrorImagesNotCached compares them.
var (
	imagesInUseGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_registrymirror_images_in_use",
		Help: "Distinct images by digest that the cluster's pods run from the host of a RegistryMirror with node access (status.imagesInUse), by mirror.",
	}, []string{"mirror_namespace", "mirror"})
	imagesCachedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_registrymirror_images_cached",
		Help: "Of those images, how many the mirror's registry holds whole, as it last reported (status.imagesCached), by mirror.",
	}, []string{"mirror_namespace", "mirror"})
)

// The cache volume's fill, as the mirror's registry last reported it (statfs of the volume:
// on a hostPath or local volume, of the node's filesystem). Alert
// QuartetRegistryMirrorCacheAlmostFull divides them.
var (
	cacheUsedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_registrymirror_cache_used_bytes",
		Help: "Used bytes of the RegistryMirror's cache volume, as its registry last reported, by mirror.",
	}, []string{"mirror_namespace", "mirror"})
	cacheCapacityGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "quartet_registrymirror_cache_capacity_bytes",
		Help: "Capacity in bytes (used plus available) of the RegistryMirror's cache volume, as its registry last reported, by mirror.",
	}, []string{"mirror_namespace", "mirror"})
)

// traffic exports each mirror's blob pulls, hits and misses, and their bytes, as counters:
// the registry's own counts since it started, as it last reported them (a restarted
// registry starts again from 0, which Prometheus's rate() reads as a counter reset).
var traffic = &trafficCollector{last: map[types.NamespacedName]CacheReport{}}

var (
	blobPullsDesc = prometheus.NewDesc("quartet_registrymirror_blob_pulls_total",
		"Blob GETs (layers, configs) the RegistryMirror's registry served since it started, by result: hit (from its cache) or miss (fetched from the upstream), as it last reported, by mirror.",
		[]string{"mirror_namespace", "mirror", "result"}, nil)
	servedBytesDesc = prometheus.NewDesc("quartet_registrymirror_served_bytes_total",
		"Bytes of blobs the RegistryMirror's registry served since it started, by source: cache or upstream, as it last reported, by mirror.",
		[]string{"mirror_namespace", "mirror", "source"}, nil)
)

type trafficCollector struct {
	mu   sync.Mutex
	last map[types.NamespacedName]CacheReport
}

func (c *trafficCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- blobPullsDesc
	ch <- servedBytesDesc
}

func (c *trafficCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for m, r := range c.last {
		for _, v := range []struct {
			desc  *prometheus.Desc
			value uint64
			label string
		}{
			{blobPullsDesc, r.BlobHits, "hit"}, {blobPullsDesc, r.BlobMisses, "miss"},
			{servedBytesDesc, r.BytesFromCache, "cache"}, {servedBytesDesc, r.BytesFromUpstream, "upstream"},
		} {
			ch <- prometheus.MustNewConstMetric(v.desc, prometheus.CounterValue, float64(v.value), m.Namespace, m.Name, v.label)
		}
	}
}

func init() {
	metrics.Registry.MustRegister(objectWrites, readyGauge, imagesInUseGauge, imagesCachedGauge, cacheUsedGauge, cacheCapacityGauge, traffic)
}

// recordCache sets the mirror's cache series from the registry's report: the volume's
// fill and the blob pulls; a pass without a report leaves the last values.
func recordCache(m types.NamespacedName, rep *CacheReport) {
	if rep == nil {
		return
	}
	traffic.mu.Lock()
	traffic.last[m] = *rep
	traffic.mu.Unlock()
	if rep.DiskCapacityBytes == 0 {
		return
	}
	cacheUsedGauge.WithLabelValues(m.Namespace, m.Name).Set(float64(rep.DiskUsedBytes))
	cacheCapacityGauge.WithLabelValues(m.Namespace, m.Name).Set(float64(rep.DiskCapacityBytes))
}

// recordImages sets the mirror's image series from its status (nil: no series).
func recordImages(m types.NamespacedName, inUse, cached *int32) {
	for _, g := range []struct {
		vec *prometheus.GaugeVec
		v   *int32
	}{{imagesInUseGauge, inUse}, {imagesCachedGauge, cached}} {
		if g.v == nil {
			g.vec.DeleteLabelValues(m.Namespace, m.Name)
			continue
		}
		g.vec.WithLabelValues(m.Namespace, m.Name).Set(float64(*g.v))
	}
}

// recordReady sets the mirror's readiness series.
func recordReady(m types.NamespacedName, ready bool) {
	operator.SetCondition(readyGauge, ready, m.Namespace, m.Name)
}

// forgetMirror drops the series of a mirror that is gone.
func forgetMirror(m types.NamespacedName) {
	readyGauge.DeleteLabelValues(m.Namespace, m.Name)
	imagesInUseGauge.DeleteLabelValues(m.Namespace, m.Name)
	imagesCachedGauge.DeleteLabelValues(m.Namespace, m.Name)
	cacheUsedGauge.DeleteLabelValues(m.Namespace, m.Name)
	cacheCapacityGauge.DeleteLabelValues(m.Namespace, m.Name)
	traffic.mu.Lock()
	delete(traffic.last, m)
	traffic.mu.Unlock()
}
