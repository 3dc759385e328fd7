package retention

import (
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func refs(names ...string) func() []digest.Digest {
	return func() []digest.Digest {
		var out []digest.Digest
		for _, n := range names {
			out = append(out, dg(n))
		}
		return out
	}
}

func entryOf(t *testing.T, r *Records, name string) Entry {
	t.Helper()
	for _, e := range r.Snapshot() {
		if e.Digest == dg(name) {
			return e
		}
	}
	require.Failf(t, "no record", "%s", name)
	return Entry{}
}

func TestRecordsUses(t *testing.T) {
	clock := NewFakeClock(at(0))
	r := NewRecords(clock)

	r.UsedManifest("library/app", dg("m"), refs("c", "l"))
	r.UsedBlob("library/app", dg("l"))
	clock.Set(at(25))
	r.UsedManifest("library/app", dg("m"), func() []digest.Digest {
		t.Fatal("references are read once: a digest's references never change")
		return nil
	})
	r.UsedBlob("other/app", dg("l"))
	r.UsedBlob("other/app", dg("l"))

	m := entryOf(t, r, "m")
	assert.Equal(t, KindManifest, m.Kind)
	assert.Equal(t, at(25), m.LastUse)
	assert.Equal(t, []digest.Digest{dg("c"), dg("l")}, m.Refs)
	assert.Equal(t, []string{"library/app"}, m.Repos)

	l := entryOf(t, r, "l")
	assert.Equal(t, KindBlob, l.Kind)
	assert.Equal(t, at(25), l.LastUse)
	assert.Equal(t, []string{"library/app", "other/app"}, l.Repos, "each repository once")

	clock.Set(at(10))
	r.UsedBlob("library/app", dg("l"))
	assert.Equal(t, at(25), entryOf(t, r, "l").LastUse, "a clock going back does not make content older")
}

func TestRecordsRestore(t *testing.T) {
	clock := NewFakeClock(at(100))
	r := NewRecords(clock)
	r.UsedBlob("library/app", dg("used-during-scan")) // at 100, newer than saved

	known, unknown := r.Restore([]Found{
		{Digest: dg("m"), Kind: KindManifest, Repos: []string{"library/app"}, Refs: []digest.Digest{dg("l")}},
		{Digest: dg("l"), Repos: []string{"library/app"}},
		{Digest: dg("used-during-scan"), Repos: []string{"library/app"}},
		{Digest: dg("orphan")},
	}, map[digest.Digest]time.Time{
		dg("m"): at(30), dg("l"): at(20), dg("used-during-scan"): at(50),
		dg("gone"): at(40), // saved but no longer on disk
	})
	assert.Equal(t, 3, known)
	assert.Equal(t, 1, unknown)

	assert.Equal(t, at(30), entryOf(t, r, "m").LastUse)
	assert.Equal(t, []digest.Digest{dg("l")}, entryOf(t, r, "m").Refs)
	assert.Equal(t, at(20), entryOf(t, r, "l").LastUse)
	assert.Equal(t, at(100), entryOf(t, r, "used-during-scan").LastUse)
	assert.Equal(t, at(100), entryOf(t, r, "orphan").LastUse, "content without a saved use counts as used at start")
	assert.Equal(t, 4, r.Len(), "saved digests no longer on disk are dropped")
}

func TestRecordsForgetKeepsContentUsedMeanwhile(t *testing.T) {
	clock := NewFakeClock(at(0))
	r := NewRecords(clock)
	r.UsedBlob("library/app", dg("l"))
	decidedOn := entryOf(t, r, "l").LastUse

	clock.Set(at(5))
	r.UsedBlob("library/app", dg("l"))
	assert.False(t, r.Forget(dg("l"), decidedOn), "pulled again while being evicted")
	assert.True(t, r.Forget(dg("l"), at(5)))
	assert.Zero(t, r.Len())
}

func TestRecordsLastUsesReportsChanges(t *testing.T) {
	r := NewRecords(NewFakeClock(at(7)))
	_, dirty := r.LastUses()
	assert.False(t, dirty)

	r.UsedBlob("library/app", dg("l"))
	got, dirty := r.LastUses()
	assert.True(t, dirty)
	assert.Equal(t, map[digest.Digest]time.Time{dg("l"): at(7)}, got)

	_, dirty = r.LastUses()
	assert.False(t, dirty, "nothing new since the last save")
	r.MarkDirty()
	_, dirty = r.LastUses()
	assert.True(t, dirty, "a failed save is retried")
}
