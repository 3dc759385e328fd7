package manager

import "k8s.io/client-go/rest"

// The manager's client-side limits on requests to the API server, the defaults of
// --kube-api-qps and --kube-api-burst.
//
// client-go's token bucket was the bottleneck of every fan-out measured: at 200/s with a
// burst of 400, 1,000 writes cannot take less than (1000-400)/200 = 3 s by construction,
// while a raw 32-worker create loop writes them in about a second on the local cluster
// (BenchmarkFanOut1000 measures a 1,000-copy fan-out at both settings against that loop;
// docs/PERFORMANCE.md has the figures). The limiter protects nobody: the API server's API
// Priority and Fairness queues and sheds load per flow, and each controller's parallelism
// is already bounded by its worker flags. So the manager ships with the client-side limiter
// off (a negative QPS: client-go then creates no rate limiter) and relies on the server's
// flow control; an admin who wants a client-side cap sets a positive QPS.
const (
	DefaultKubeAPIQPS   = -1
	DefaultKubeAPIBurst = 400
)

// SetClientLimits sets cfg's client-side rate limit: qps requests per second with bursts of
// burst, or none when qps is negative.
func SetClientLimits(cfg *rest.Config, qps float64, burst int) {
	cfg.QPS, cfg.Burst = float32(qps), burst
}
