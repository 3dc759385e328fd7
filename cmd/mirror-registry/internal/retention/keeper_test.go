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

func TestNewRefusesBadOptions(t *testing.T) {
	driver := filesystem.New(filesystem.DriverParameters{RootDirectory: t.TempDir(), MaxThreads: 25})
	_, err := New(context.Background(), driver, Options{StateFile: "/s"})
	assert.ErrorContains(t, err, "retention must be positive")
	_, err = New(context.Background(), driver, Options{Retention: time.Hour})
	assert.ErrorContains(t, err, "state file is required")
}
