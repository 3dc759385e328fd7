package registrymirror

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quartet-operator/quartet/test/testenv"
)

// TestCacheReportSeries: the blob pulls and bytes are the registry's own counts as it last
// reported them, a counter that starts again when the registry restarted (a lower count),
// and go with the mirror.
func TestCacheReportSeries(t *testing.T) {
	key := types.NamespacedName{Namespace: "metrics-test", Name: "m"}
	hits := func() float64 { return testutil.ToFloat64(blobPulls.WithLabelValues(key.Namespace, key.Name, "hit")) }
	recordStatus(key, minimalMirror().Status, &CacheReport{BlobHits: 5, BlobMisses: 2, BytesFromCache: 1 << 40})
	assert.Equal(t, 5.0, hits())
	assert.Equal(t, float64(1<<40), testutil.ToFloat64(servedBytes.WithLabelValues(key.Namespace, key.Name, "cache")))
	recordStatus(key, minimalMirror().Status, nil)
	assert.Equal(t, 5.0, hits(), "a pass without a report leaves the last values")
	recordStatus(key, minimalMirror().Status, &CacheReport{BlobHits: 9})
	assert.Equal(t, 9.0, hits())
	recordStatus(key, minimalMirror().Status, &CacheReport{BlobHits: 3})
	assert.Equal(t, 3.0, hits(), "the registry restarted: its count starts again")
	forgetMirror(key)
	mirror := map[string]string{"mirror_namespace": key.Namespace, "mirror": key.Name}
	assert.Zero(t, testenv.Series(blobPulls, mirror)+testenv.Series(servedBytes, mirror), "forgotten with the mirror")
}
