package benchutil

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/quartet-operator/quartet/test/localcluster"
)

// BenchmarkRawCreate is the baseline every controller benchmark compares itself with: the
// rate at which a tuned client-go loop (32 workers, no client-side rate limit) creates
// 1,000 ConfigMaps and 1,000 Secrets of 1 KiB across 100 namespaces on the full local
// cluster.
func BenchmarkRawCreate(b *testing.B) {
	binDir, kwokDir, err := DefaultDirs()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, err := localcluster.Start(ctx, localcluster.Options{Dir: b.TempDir(), BinDir: binDir, KwokDir: kwokDir, Full: true})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := c.Stop(); err != nil {
			b.Errorf("stopping the local cluster: %v", err)
		}
	}()
	cs, err := kubernetes.NewForConfig(TunedConfig(c.RestConfig()))
	if err != nil {
		b.Fatal(err)
	}
	namespaces, err := CreateNamespaces(ctx, cs, "raw", 100)
	if err != nil {
		b.Fatal(err)
	}
	var cmTotal, secretTotal time.Duration
	for i := 0; i < b.N; i++ {
		for j := 0; j < 10; j++ {
			d, err := RawCreateConfigMaps(ctx, cs, namespaces, fmt.Sprintf("cm-%d-%d", i, j), 1024)
			if err != nil {
				b.Fatal(err)
			}
			cmTotal += d
			d, err = RawCreateSecrets(ctx, cs, namespaces, fmt.Sprintf("secret-%d-%d", i, j), 1024)
			if err != nil {
				b.Fatal(err)
			}
			secretTotal += d
		}
	}
	n := float64(b.N * 1000)
	b.ReportMetric(n/cmTotal.Seconds(), "configmaps/s")
	b.ReportMetric(n/secretTotal.Seconds(), "secrets/s")
	b.ReportMetric(cmTotal.Seconds()/float64(b.N), "s/1000-configmaps")
	b.ReportMetric(secretTotal.Seconds()/float64(b.N), "s/1000-secrets")
}

// DefaultDirs wraps localcluster.DefaultBinDirs for this package's tests.
func DefaultDirs() (string, string, error) {
	if os.Getenv("QUARTET_SKIP_INTEGRATION") != "" {
		return "", "", fmt.Errorf("QUARTET_SKIP_INTEGRATION set")
	}
	return localcluster.DefaultBinDirs()
}
