package exchangerate

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"

	operatorsv1 "github.com/quartet-operator/quartet/api/operators/v1"
)

// exponentialBackoff is the wait before retrying a failed fetch: base after the first
// failure, doubling with each further failure, never more than max. Each Step of the
// returned value is the wait after one more failure; the cap, not Steps, ends the growth.
func exponentialBackoff(base, max time.Duration) wait.Backoff {
	return wait.Backoff{Duration: base, Factor: 2, Cap: max, Steps: math.MaxInt32}
}

// Snapshot is what the cache knows about its source.
type Snapshot struct {
	// Table is the last good table, nil until a fetch succeeded. Failures never replace it.
	Table *Table
	// CheckedAt is when the source last confirmed Table (200 or 304).
	CheckedAt time.Time
	// FetchedAt is when the source sent Table: the 200 that brought it. A 304 confirms the
	// table without sending it again and moves only CheckedAt, so FetchedAt changes only
	// with the table.
	FetchedAt time.Time
	// Err is why the last attempt failed (a *FetchError); nil when it succeeded.
	Err error
	// RetryAt is when the next attempt is allowed after a failure.
	RetryAt time.Time
}

// RateCache is the one table per source that every ExchangeRate reads. However many
// reconcilers ask at once, a refresh is one upstream request: concurrent callers share
// the flight, and callers arriving after it find the fresh table. After a failure nobody
// reaches the upstream before RetryAt, which backs off exponentially up to a cap.
type RateCache struct {
	source   Source
	schedule Schedule
	clock    clock.PassiveClock
	backoff  wait.Backoff // the retry schedule every run of failures starts from
	timeout  time.Duration
	flight   singleflight.Group

	mu        sync.Mutex
	table     *Table
	checkedAt time.Time
	fetchedAt time.Time
	attempts  uint64
	// retry is the current run of failures' schedule: one Step per failure, reset to
	// backoff by a success.
	retry   wait.Backoff
	lastErr error
	retryAt time.Time
}

// NewRateCache returns an empty cache of source. timeout bounds each fetch.
// backoff spaces the attempts after failures (exponentialBackoff).
func NewRateCache(source Source, clk clock.PassiveClock, backoff wait.Backoff, timeout time.Duration) *RateCache {
	return &RateCache{source: source, schedule: sourceSchedule(source), clock: clk, backoff: backoff, retry: backoff, timeout: timeout}
}

// Name is the source's name.
func (c *RateCache) Name() string { return c.source.Name() }

// Schedule is when the source publishes (zero: at no known time).
func (c *RateCache) Schedule() Schedule { return c.schedule }

// Get returns the source's table, fetching it when it is due (dueAt): older than maxAge,
// checked before the source's latest publication, or missing; or when a retry after a
// failure is due. Otherwise, and while backing off, it answers from memory.
func (c *RateCache) Get(ctx context.Context, maxAge time.Duration) Snapshot {
	c.mu.Lock()
	now := c.clock.Now()
	switch {
	case c.lastErr != nil && now.Before(c.retryAt):
		// Backing off: the upstream is not asked again before retryAt.
		defer c.mu.Unlock()
		return c.snapshotLocked()
	case c.lastErr == nil && c.table != nil && now.Before(dueAt(c.snapshotLocked(), c.schedule, maxAge)):
		defer c.mu.Unlock()
		return c.snapshotLocked()
	}
	seen := c.attempts
	c.mu.Unlock()

	// The flight runs the first caller's function; its context must not cancel the
	// others' answer, so the fetch gets its own deadline instead.
	_, _, _ = c.flight.Do("fetch", func() (any, error) {
		c.fetch(context.WithoutCancel(ctx), seen)
		return nil, nil
	})
	return c.Snapshot()
}

// Snapshot returns the cache's state without fetching.
func (c *RateCache) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

func (c *RateCache) snapshotLocked() Snapshot {
	return Snapshot{Table: c.table, CheckedAt: c.checkedAt, FetchedAt: c.fetchedAt, Err: c.lastErr, RetryAt: c.retryAt}
}

// fetch asks the source once, unless an attempt finished since the caller looked (then
// the caller's question is already answered).
func (c *RateCache) fetch(ctx context.Context, seen uint64) {
	c.mu.Lock()
	if c.attempts != seen {
		c.mu.Unlock()
		return
	}
	prev := c.table
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now() //nolint:forbidigo // latency is an observation for metrics, not a decision: real time
	t, err := c.source.Fetch(ctx, prev)
	elapsed := time.Since(start) //nolint:forbidigo // as start

	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts++
	now := c.clock.Now()
	if err != nil {
		var fe *FetchError
		if !errors.As(err, &fe) {
			fe = &FetchError{Reason: operatorsv1.ReasonUpstreamUnreachable, Err: err}
		}
		c.lastErr = fe
		c.retryAt = now.Add(c.retry.Step())
		recordFetch(c.source.Name(), fe.result(), elapsed)
		return
	}
	result := resultOK
	if t == prev {
		result = resultNotModified
	}
	// A mirror behind a load balancer may answer with an older publication than one we
	// already have; never step back to it.
	if prev != nil && t.Date < prev.Date {
		t = prev
	}
	c.retry, c.lastErr, c.retryAt = c.backoff, nil, time.Time{}
	if t != prev {
		c.fetchedAt = now
	}
	c.table, c.checkedAt = t, now
	recordFetch(c.source.Name(), result, elapsed)
	recordSuccess(c.source.Name(), now)
}
