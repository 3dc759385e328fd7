package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/opencontainers/go-digest"
	"github.com/sirupsen/logrus"
)

// Options configure a Keeper, as mirror-registry's flags of the same names do.
type Options struct {
	Retention          time.Duration             // content not used for longer is deleted
	MaxDiskPercent     float64                   // above this fill the least recently used unpinned content goes (0: off)
	DiskEvictionMinAge time.Duration             // content used or pinned within it is not deleted for disk space
	PinnedFile         string                    // digests never to delete ("" pins nothing)
	StateFile          string                    // keeps the last uses across restarts
	Clock              Clock                     // timestamps uses and decisions
	DiskUsage          func() (DiskUsage, error) // measures the storage volume
	Log                logrus.FieldLogger
}

// Keeper keeps the cache by use: it records uses (through Records' middleware), restores
// them at start, deletes what the eviction decision picks, and saves the state file.
type Keeper struct {
	opts          Options
	records       *Records
	store         *contentStore
	deleteContent func(context.Context, Entry) error // store.delete; tests make it fail

	// passMu serialises eviction passes and guards pins, restored and pinnedBefore(At).
	passMu   sync.Mutex
	pins     pinFile
	restored bool
	// pinnedBefore are the digests the previous pass kept for a pin (with all they reference),
	// at pinnedBeforeAt. One no longer pinned counts as used then: a pinned image is in use, so
	// its retention (and DiskEvictionMinAge) runs from when the pin went, not from its last
	// pull. A restart forgets them; the pins of the file then are all that count.
	pinnedBefore   map[digest.Digest]bool
	pinnedBeforeAt time.Time

	disk atomic.Pointer[DiskUsage] // the storage volume's fill at the last eviction pass (nil before)
}

// LastDisk is the storage volume's fill the last eviction pass measured (zero before).
func (k *Keeper) LastDisk() DiskUsage {
	if d := k.disk.Load(); d != nil {
		return *d
	}
	return DiskUsage{}
}

// New returns a Keeper for the registry storage behind driver.
func New(ctx context.Context, driver storagedriver.StorageDriver, opts Options) (*Keeper, error) {
	if opts.Retention <= 0 {
		return nil, fmt.Errorf("retention must be positive, not %s", opts.Retention)
	}
	if opts.DiskEvictionMinAge < 0 {
		return nil, fmt.Errorf("the minimum age for eviction for disk space must not be negative, not %s", opts.DiskEvictionMinAge)
	}
	if opts.StateFile == "" {
		return nil, errors.New("a state file is required")
	}
	opts.Clock = cmp.Or[Clock](opts.Clock, RealClock{})
	opts.Log = cmp.Or[logrus.FieldLogger](opts.Log, logrus.StandardLogger())
	if opts.DiskUsage == nil {
		opts.DiskUsage = func() (DiskUsage, error) { return DiskUsage{}, nil }
	}
	store, err := newContentStore(ctx, driver)
	if err != nil {
		return nil, err
	}
	records := NewRecords(opts.Clock)
	records.traffic = &Traffic{stored: func(ctx context.Context, d digest.Digest) bool { return store.cached(ctx, "", d, KindBlob) }}
	return &Keeper{opts: opts, records: records, store: store, deleteContent: store.delete,
		pins: pinFile{path: opts.PinnedFile}}, nil
}

// Records are where the registry's middleware records uses.
func (k *Keeper) Records() *Records { return k.records }

// Restore reads the state file and scans the storage: every cached digest gets its saved last
// use, or now (all of them if the file cannot be decoded: kept one more retention). Eviction waits for it.
func (k *Keeper) Restore(ctx context.Context) error {
	k.passMu.Lock()
	defer k.passMu.Unlock()
	if k.restored {
		return nil
	}
	start := time.Now()
	saved, err := readStateFile(k.opts.StateFile)
	if err != nil {
		k.opts.Log.WithError(err).WithField("stateFile", k.opts.StateFile).
			Warn("Ignored unreadable state file; cached content counts as used now")
	}
	found, err := k.store.scan(ctx)
	if err != nil {
		return fmt.Errorf("scanning the cache: %w", err)
	}
	known, unknown := k.records.Restore(found, saved)
	k.restored = true
	recordsGauge.Set(float64(k.records.Len()))
	k.opts.Log.WithFields(logrus.Fields{"digests": len(found), "withSavedLastUse": known, "usedNow": unknown,
		"took": time.Since(start).Round(time.Millisecond).String()}).Info("Restored cache last uses")
	return nil
}

// Result is what one eviction pass did.
type Result struct {
	Decision Decision
	Evicted  []Eviction
	Failed   []Eviction
}

// Evict runs one eviction pass now: read the pins, measure the disk, decide, delete.
// Nothing is deleted before Restore, nor while the pinned digests file cannot be read.
func (k *Keeper) Evict(ctx context.Context) (Result, error) {
	k.passMu.Lock()
	defer k.passMu.Unlock()
	if !k.restored {
		return Result{}, errors.New("last uses not restored yet")
	}
	pins, err := k.loadPins()
	if err != nil {
		return Result{}, err
	}

	now := k.opts.Clock.Now()
	entries := k.records.Snapshot()
	pinnedNow := newContentGraph(contentOf(entries)).closure(pins)
	unpinned := false
	for d := range k.pinnedBefore {
		if !pinnedNow[d] {
			k.records.UsedUntil(d, k.pinnedBeforeAt)
			unpinned = true
		}
	}
	if unpinned {
		entries = k.records.Snapshot() // with the last uses of the unpinned
	}
	k.pinnedBefore, k.pinnedBeforeAt = pinnedNow, now
	byDigest := make(map[digest.Digest]Entry, len(entries))
	for i, e := range entries {
		if e.Size == 0 {
			if size, err := k.store.size(ctx, e.Digest); err == nil {
				entries[i].Size = size
				k.records.SetSize(e.Digest, size)
			}
		}
		byDigest[e.Digest] = entries[i]
	}
	disk := k.measureDisk()
	decision := Decide(Input{Now: now, Retention: k.opts.Retention, Content: contentOf(entries),
		Pinned: pins, Disk: disk, MaxDiskPercent: k.opts.MaxDiskPercent, MinAge: k.opts.DiskEvictionMinAge})
	pinnedGauge.Set(float64(decision.Pinned))
	res := k.deleteEvicted(ctx, decision, byDigest)
	if decision.StillAboveThreshold {
		k.opts.Log.WithFields(logrus.Fields{"diskPercent": fmt.Sprintf("%.1f", disk.Percent()), "maxDiskPercent": k.opts.MaxDiskPercent,
			"pinned": decision.Pinned, "minAge": k.opts.DiskEvictionMinAge.String()}).
			Warn("Disk stays above the threshold: the rest is pinned, used within the minimum age, or not the cache's")
	}
	recordsGauge.Set(float64(k.records.Len()))
	return res, nil
}

// measureDisk measures and publishes the disk's usage (zero if unreadable: the pass evicts by retention only).
func (k *Keeper) measureDisk() DiskUsage {
	disk, err := k.opts.DiskUsage()
	if err != nil {
		k.opts.Log.WithError(err).Warn("Could not measure the disk; evicting by retention only")
		disk = DiskUsage{}
	}
	k.disk.Store(&disk)
	diskUsedBytes.Set(float64(disk.UsedBytes))
	diskCapacityBytes.Set(float64(disk.CapacityBytes))
	return disk
}

// deleteEvicted deletes what decision evicts, except what a kept (or failed) manifest still references.
func (k *Keeper) deleteEvicted(ctx context.Context, decision Decision, byDigest map[digest.Digest]Entry) Result {
	res := Result{Decision: decision}
	var kept []digest.Digest // failed, or referenced by what was kept
	for _, ev := range decision.Evict {
		e := byDigest[ev.Digest]
		if slices.ContainsFunc(kept, func(m digest.Digest) bool { return slices.Contains(byDigest[m].Refs, ev.Digest) }) {
			// A manifest above it is still there: keep what it needs until the manifest goes.
			kept = append(kept, ev.Digest)
			continue
		}
		log := k.opts.Log.WithFields(logrus.Fields{"digest": ev.Digest, "kind": kindName(e.Kind),
			"repositories": e.Repos, "reason": ev.Reason, "lastUse": ev.LastUse.UTC().Format(time.RFC3339), "bytes": ev.Size})
		if err := k.deleteContent(ctx, e); err != nil {
			log.WithError(err).Error("Failed to evict cached content")
			evictionFailuresTotal.Inc()
			res.Failed = append(res.Failed, ev)
			kept = append(kept, ev.Digest)
			continue
		}
		k.records.Forget(ev.Digest, e.LastUse)
		evictionsTotal.WithLabelValues(string(ev.Reason)).Inc()
		evictedBytesTotal.WithLabelValues(string(ev.Reason)).Add(float64(ev.Size))
		res.Evicted = append(res.Evicted, ev)
		log.Info("Evicted cached content")
	}
	return res
}

// IsRestored says whether Restore has finished.
func (k *Keeper) IsRestored() bool {
	k.passMu.Lock()
	defer k.passMu.Unlock()
	return k.restored
}

// PinnedImages re-reads the pinned-digests file if it changed; it returns its lines and version (grows on every read anew).
func (k *Keeper) PinnedImages() ([]Pin, uint64, error) {
	k.passMu.Lock()
	defer k.passMu.Unlock()
	if _, err := k.loadPins(); err != nil {
		return nil, k.pins.version, err
	}
	return slices.Clone(k.pins.images), k.pins.version, nil
}

// loadPins re-reads the pinned-digests file if it changed, logging what it read; passMu is held.
func (k *Keeper) loadPins() (map[digest.Digest]bool, error) {
	pins, changed, invalid, err := k.pins.load()
	if changed {
		k.opts.Log.WithFields(logrus.Fields{"pinnedFile": k.opts.PinnedFile, "digests": len(pins), "images": len(k.pins.images),
			"invalidLines": len(invalid)}).Info("Read pinned digests")
	}
	return pins, err
}

func contentOf(entries []Entry) []Content {
	content := make([]Content, len(entries))
	for i, e := range entries {
		content[i] = e.Content
	}
	return content
}

func kindName(k Kind) string {
	if k == KindManifest {
		return "manifest"
	}
	return "blob"
}

// Save writes the state file if a use was recorded since the last save. Before Restore it
// writes nothing: the file still holds the only copy of the older last uses.
func (k *Keeper) Save() error {
	if !k.IsRestored() {
		return nil
	}
	lastUse, dirty := k.records.LastUses()
	if !dirty {
		return nil
	}
	if err := writeStateFile(k.opts.StateFile, lastUse); err != nil {
		k.records.MarkDirty()
		return fmt.Errorf("saving last uses to %s: %w", k.opts.StateFile, err)
	}
	return nil
}

// Run restores, then evicts every evictEvery and saves every saveEvery until ctx ends, then
// saves once more. The tickers only schedule passes; the Clock decides what is due.
func (k *Keeper) Run(ctx context.Context, evictEvery, saveEvery time.Duration) {
	evict := time.NewTicker(evictEvery)
	defer evict.Stop()
	save := time.NewTicker(saveEvery)
	defer save.Stop()
	restore := func() {
		if err := k.Restore(ctx); err != nil {
			k.opts.Log.WithError(err).Error("Failed to restore cache last uses; retrying at the next eviction interval")
		}
	}
	restore()
	for {
		select {
		case <-ctx.Done():
			if err := k.Save(); err != nil {
				k.opts.Log.WithError(err).Error("Failed to save last uses at shutdown")
			}
			return
		case <-save.C:
			if err := k.Save(); err != nil {
				k.opts.Log.WithError(err).Error("Failed to save last uses")
			}
		case <-evict.C:
			restore()
			if _, err := k.Evict(ctx); err != nil {
				k.opts.Log.WithError(err).Error("Skipped eviction pass")
			}
		}
	}
}
