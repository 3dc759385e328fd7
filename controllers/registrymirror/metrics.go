package registrymirror

import (
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

func init() {
	metrics.Registry.MustRegister(objectWrites, readyGauge, imagesInUseGauge, imagesCachedGauge, cacheUsedGauge, cacheCapacityGauge)
}

// recordDisk sets the mirror's cache volume series from the registry's report; a pass
// without one leaves the last values.
func recordDisk(m types.NamespacedName, rep *CacheReport) {
	if rep == nil || rep.DiskCapacityBytes == 0 {
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
}
