package retention

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newTestKeeper(t *testing.T, pinnedFile string) (*Keeper, *FakeClock, string) {
	t.Helper()
	root := t.TempDir()
	clock := NewFakeClock(at(0))
	stateFile := filepath.Join(root, "quartet", "last-use")
	k, err := New(context.Background(), filesystem.New(filesystem.DriverParameters{RootDirectory: root, MaxThreads: 25}),
		Options{Retention: 40 * time.Second, StateFile: stateFile, PinnedFile: pinnedFile, Clock: clock})
	require.NoError(t, err)
	return k, clock, stateFile
}

func TestKeeperWaitsForRestore(t *testing.T) {
	k, _, stateFile := newTestKeeper(t, "")
	k.Records().UsedBlob("library/app", dg("l"))

	_, err := k.Evict(context.Background())
	require.ErrorContains(t, err, "not restored", "nothing is evicted before the saved last uses are known")
	require.NoError(t, k.Save())
	assert.NoFileExists(t, stateFile, "the saved last uses are not overwritten before they were read")

	require.NoError(t, k.Restore(context.Background()))
	_, err = k.Evict(context.Background())
	require.NoError(t, err)
	require.NoError(t, k.Save())
	assert.FileExists(t, stateFile)
}

func TestKeeperEvictsNothingWhilePinsAreUnreadable(t *testing.T) {
	pinned := filepath.Join(t.TempDir(), "pinned")
	require.NoError(t, os.WriteFile(pinned, []byte(strings.Repeat("x", 2<<20)), 0o644))
	k, clock, _ := newTestKeeper(t, pinned)
	require.NoError(t, k.Restore(context.Background()))
	k.Records().UsedBlob("library/app", dg("l"))
	clock.Set(at(1000))

	_, err := k.Evict(context.Background())
	require.ErrorContains(t, err, "pinned digests file")
	assert.Equal(t, 1, k.Records().Len())
}

func TestKeeperIgnoresAnUnreadableStateFile(t *testing.T) {
	k, _, stateFile := newTestKeeper(t, "")
	require.NoError(t, os.MkdirAll(filepath.Dir(stateFile), 0o755))
	require.NoError(t, os.WriteFile(stateFile, []byte("not a state file\n"), 0o644))
	require.NoError(t, k.Restore(context.Background()), "content then counts as used now")
}

func TestKeeperKeepsWhatAFailedManifestReferences(t *testing.T) {
	k, clock, _ := newTestKeeper(t, "")
	require.NoError(t, k.Restore(context.Background()))
	records := k.Records()
	records.UsedManifest("library/app", dg("index"), refs("m"))
	records.UsedManifest("library/app", dg("m"), refs("l"))
	records.UsedBlob("library/app", dg("l"))
	records.UsedBlob("library/app", dg("unrelated"))
	var deleted []string
	k.deleteContent = func(_ context.Context, e Entry) error {
		if e.Digest == dg("index") {
			return errors.New("disk on fire")
		}
		deleted = append(deleted, e.Digest.String())
		return nil
	}
	clock.Set(at(1000))

	res, err := k.Evict(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []string{dg("unrelated").String()}, deleted,
		"the index stays, so its manifest and that manifest's layer stay too")
	require.Len(t, res.Failed, 1)
	assert.Equal(t, 4-1, records.Len())
}

// TestKeeperCountsAPinAsUseUntilItGoes: an image pinned for longer than the retention,
// never pulled meanwhile (its pods ran on), is not evicted when its pin goes (its pods
// rescheduled, their replacements not started yet): its retention (40 s) runs from the
// last pass that saw it pinned, and on a full disk so does the minimum age (30 s).
func TestKeeperCountsAPinAsUseUntilItGoes(t *testing.T) {
	for _, tt := range []struct {
		name       string
		used       uint64
		keptAt     []int
		evictedAt  int
		wantReason Reason
	}{
		{name: "by retention", used: 10, keptAt: []int{110, 125, 140}, evictedAt: 141, wantReason: ReasonNotUsedWithinRetention},
		{name: "for disk space", used: 100, keptAt: []int{110, 125, 130}, evictedAt: 131, wantReason: ReasonDiskAboveThreshold},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pinned := filepath.Join(t.TempDir(), "pinned")
			require.NoError(t, os.WriteFile(pinned, []byte(dg("m").String()+"\n"), 0o644))
			k, clock, _ := newTestKeeper(t, pinned)
			k.opts.MaxDiskPercent, k.opts.DiskEvictionMinAge = 50, 30*time.Second
			k.opts.DiskUsage = func() (DiskUsage, error) { return DiskUsage{UsedBytes: tt.used, CapacityBytes: 100}, nil }
			require.NoError(t, k.Restore(context.Background()))
			records := k.Records()
			records.UsedManifest("library/app", dg("m"), refs("l"))
			records.UsedBlob("library/app", dg("l"))
			records.UsedBlob("library/app", dg("unpinned"))

			clock.Set(at(100)) // pulled at 0: the pin alone keeps the image
			res, err := k.Evict(context.Background())
			require.NoError(t, err)
			require.Len(t, res.Evicted, 1)
			assert.Equal(t, dg("unpinned"), res.Evicted[0].Digest)
			assert.Equal(t, 2, res.Decision.Pinned)

			require.NoError(t, os.WriteFile(pinned, []byte("# no pods run it now\n"), 0o644))
			for _, now := range tt.keptAt {
				clock.Set(at(now))
				res, err = k.Evict(context.Background())
				require.NoError(t, err)
				assert.Empty(t, res.Evicted, "at %d s: last pinned at 100 s", now)
			}
			clock.Set(at(tt.evictedAt))
			res, err = k.Evict(context.Background())
			require.NoError(t, err)
			require.Len(t, res.Evicted, 2, "at %d s the image goes", tt.evictedAt)
			for _, e := range res.Evicted {
				assert.Equal(t, tt.wantReason, e.Reason)
				assert.Equal(t, at(100), e.LastUse, "its last use is the last pass that saw it pinned")
			}
		})
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	driver := filesystem.New(filesystem.DriverParameters{RootDirectory: t.TempDir(), MaxThreads: 25})
	_, err := New(context.Background(), driver, Options{StateFile: "/s"})
	assert.ErrorContains(t, err, "retention must be positive")
	_, err = New(context.Background(), driver, Options{Retention: time.Hour})
	assert.ErrorContains(t, err, "state file is required")
	_, err = New(context.Background(), driver, Options{Retention: time.Hour, StateFile: "/s", DiskEvictionMinAge: -time.Second})
	assert.ErrorContains(t, err, "must not be negative")
}
