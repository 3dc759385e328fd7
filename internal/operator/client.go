package operator

import "k8s.io/client-go/rest"

// The manager's client-side limits on requests to the API server, the defaults of
// --kube-api-qps and --kube-api-burst.
//
// client-go's token bucket was the bottleneck of every fan-out measured (docs/PERFORMANCE.md:
// 1,000 copies took 2.6× a raw create loop at 200/400 and 1.2× with the limit out of the way),
// and it protects nobody: the API server's API Priority and Fairness queues and sheds load per
// flow, and each controller's parallelism is already bounded by its worker flags. So the
// manager ships with the client-side limiter off (a negative QPS: client-go then creates no
// rate limiter) and relies on the server's flow control, as client-go allows; an admin who
// wants a client-side cap sets a positive QPS.
const (
	DefaultKubeAPIQPS   = -1
	DefaultKubeAPIBurst = 400
)

// SetClientLimits sets cfg's client-side rate limit: qps requests per second with bursts of
// burst, or none when qps is negative.
func SetClientLimits(cfg *rest.Config, qps float64, burst int) {
	cfg.QPS, cfg.Burst = float32(qps), burst
}
