package realnode

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Timings collects the phase durations the docs quote; Main prints them at the end. Tests
// running in parallel may record at once.
type Timings struct {
	mu    sync.Mutex
	lines []string
}

// Add records the time since since.
func (l *Timings) Add(what string, since time.Time) { l.Record(what, time.Since(since)) }

// Record records a duration.
func (l *Timings) Record(what string, d time.Duration) {
	d = d.Round(100 * time.Millisecond)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf("%-70s %7s", what, d))
	fmt.Printf("TIMING %s: %s\n", what, d)
}

func (l *Timings) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// Main is the TestMain of a real-node test package. Without QUARTET_REAL_NODE the tests
// run (and skip). Otherwise it starts a real node into *env, runs setUp and the tests,
// runs each after func once the tests ended (a failure fails the run), pauses before tearing
// down a failed run when asked (PauseIfAsked), stops the node (its
// folder is kept after a failure or with QUARTET_E2E_KEEP) and prints timings.
func Main(m *testing.M, name string, timeout time.Duration, env **Env, timings *Timings, setUp func(ctx context.Context) error, after ...func(ctx context.Context) error) {
	flag.Parse()
	if !Enabled() {
		os.Exit(m.Run())
	}
	os.Exit(runMain(m, name, timeout, env, timings, setUp, after))
}

func runMain(m *testing.M, name string, timeout time.Duration, env **Env, timings *Timings, setUp func(ctx context.Context) error, after []func(ctx context.Context) error) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	e, err := Start(ctx, func(f string, a ...any) { fmt.Printf(f+"\n", a...) })
	if err != nil {
		fmt.Printf("%s: starting the real node: %v\n", name, err)
		return 1
	}
	timings.Add("real node start (control plane, kubelet, containerd, DNS)", start)
	*env = e
	defer func() {
		if code != 0 {
			e.PauseIfAsked()
		}
		since := time.Now()
		if err := e.Stop(code != 0 || os.Getenv("QUARTET_E2E_KEEP") != ""); err != nil {
			fmt.Printf("%s: stopping the real node: %v\n", name, err)
			code = 1
		}
		timings.Add("real node stop and host restore", since)
		fmt.Printf("timings:\n%s\n", timings)
	}()
	if setUp != nil {
		if err := setUp(ctx); err != nil {
			fmt.Printf("%s: setting up: %v\n", name, err)
			return 1
		}
	}
	code = m.Run()
	for _, f := range after {
		if err := f(ctx); err != nil {
			fmt.Printf("%s: after the tests: %v\nFAIL\n", name, err)
			code = 1
		}
	}
	return code
}
