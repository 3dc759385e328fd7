package retention

import (
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/assert"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(seconds int) time.Time { return t0.Add(time.Duration(seconds) * time.Second) }

func dg(name string) digest.Digest { return digest.FromString(name) }

func blob(name string, lastUse, size int) Content {
	return Content{Digest: dg(name), LastUse: at(lastUse), Size: int64(size)}
}

func manifest(name string, lastUse int, refs ...string) Content {
	c := Content{Digest: dg(name), LastUse: at(lastUse), Size: 500}
	for _, r := range refs {
		c.Refs = append(c.Refs, dg(r))
	}
	return c
}

func pins(names ...string) map[digest.Digest]bool {
	out := map[digest.Digest]bool{}
	for _, n := range names {
		out[dg(n)] = true
	}
	return out
}

type evicted struct {
	name    string
	reason  Reason
	lastUse int
}

func TestDecide(t *testing.T) {
	const retention = 40 * time.Second
	tests := []struct {
		name      string
		now       int
		content   []Content
		pinned    map[digest.Digest]bool
		disk      DiskUsage
		maxPct    float64
		minAge    time.Duration
		want      []evicted
		wantPins  int
		wantAbove bool
	}{
		{name: "nothing recorded", now: 1000},
		{
			name: "used within retention is kept however old the first fetch", now: 55,
			content: []Content{manifest("m", 25, "l"), blob("l", 25, 1000)},
		},
		{
			name: "used exactly one retention ago is kept", now: 65,
			content: []Content{blob("l", 25, 1000)},
		},
		{
			name: "not used for longer than retention is evicted, manifest first", now: 70,
			content: []Content{blob("l", 25, 1000), manifest("m", 25, "l")},
			want:    []evicted{{"m", ReasonNotUsedWithinRetention, 25}, {"l", ReasonNotUsedWithinRetention, 25}},
		},
		{
			name: "a layer no node pulled lately stays while its manifest is pulled", now: 100,
			content: []Content{manifest("m", 90, "l"), blob("l", 0, 1000)},
		},
		{
			name: "an index's recent pull keeps its manifests and their layers", now: 100,
			content: []Content{manifest("index", 90, "m"), manifest("m", 1, "l"), blob("l", 0, 1000)},
		},
		{
			name: "a layer shared with a recent image stays, the old image goes", now: 100,
			content: []Content{manifest("old", 10, "shared", "oldonly"), manifest("new", 90, "shared"),
				blob("shared", 10, 1000), blob("oldonly", 10, 1000)},
			want: []evicted{{"old", ReasonNotUsedWithinRetention, 10}, {"oldonly", ReasonNotUsedWithinRetention, 10}},
		},
		{
			name: "a pinned manifest keeps itself and all it references", now: 1000,
			content: []Content{manifest("m", 0, "c", "l"), blob("c", 0, 10), blob("l", 0, 1000), blob("other", 0, 5)},
			pinned:  pins("m"),
			want:    []evicted{{"other", ReasonNotUsedWithinRetention, 0}}, wantPins: 3,
		},
		{
			name: "a pinned index keeps its manifests and their layers", now: 1000,
			content: []Content{manifest("index", 0, "m"), manifest("m", 0, "l"), blob("l", 0, 1000)},
			pinned:  pins("index"), wantPins: 3,
		},
		{
			name: "a pin of content not cached pins nothing", now: 1000,
			content: []Content{blob("l", 0, 1000)},
			pinned:  pins("elsewhere"),
			want:    []evicted{{"l", ReasonNotUsedWithinRetention, 0}},
		},
		{
			name: "above the threshold the least recently used go first until below", now: 30,
			content: []Content{
				manifest("a", 10, "la"), blob("la", 10, 1000),
				manifest("b", 20, "lb"), blob("lb", 20, 1000),
				manifest("c", 5, "lc"), blob("lc", 5, 1000),
			},
			// 3900 used, 3000 allowed: the least recently used image, c (1500 bytes), is enough.
			disk: DiskUsage{UsedBytes: 3900, CapacityBytes: 5000}, maxPct: 60,
			want: []evicted{{"c", ReasonDiskAboveThreshold, 5}, {"lc", ReasonDiskAboveThreshold, 5}},
		},
		{
			name: "expired content counts towards the space to free", now: 100,
			content: []Content{blob("old", 10, 2000), blob("recent", 90, 1000)},
			disk:    DiskUsage{UsedBytes: 3000, CapacityBytes: 3000}, maxPct: 50,
			want: []evicted{{"old", ReasonNotUsedWithinRetention, 10}},
		},
		{
			name: "pinned content is never evicted for space", now: 30,
			content: []Content{blob("pinned", 0, 5000), blob("recent", 20, 1000)},
			pinned:  pins("pinned"),
			disk:    DiskUsage{UsedBytes: 6000, CapacityBytes: 6000}, maxPct: 50,
			want: []evicted{{"recent", ReasonDiskAboveThreshold, 20}}, wantPins: 1, wantAbove: true,
		},
		{
			name: "above the threshold nothing used within the minimum age goes", now: 1000,
			content: []Content{
				manifest("old", 100, "lold"), blob("lold", 100, 1000),
				manifest("recent", 990, "lrecent"), blob("lrecent", 990, 1000),
			},
			// Only evicting both would bring the disk below; the recent image was pulled 10 s
			// ago, within the minimum age of 60 s.
			disk: DiskUsage{UsedBytes: 10000, CapacityBytes: 10000}, maxPct: 80, minAge: 60 * time.Second,
			want:      []evicted{{"old", ReasonNotUsedWithinRetention, 100}, {"lold", ReasonNotUsedWithinRetention, 100}},
			wantAbove: true,
		},
		{
			name: "above the threshold content used just over the minimum age ago goes", now: 50,
			content: []Content{blob("old", 29, 1000), blob("edge", 30, 1000)},
			disk:    DiskUsage{UsedBytes: 10000, CapacityBytes: 10000}, maxPct: 85, minAge: 20 * time.Second,
			want: []evicted{{"old", ReasonDiskAboveThreshold, 29}}, wantAbove: true,
		},
		{
			name: "the minimum age leaves retention alone", now: 1000,
			content: []Content{blob("expired", 900, 1000)},
			minAge:  time.Hour,
			want:    []evicted{{"expired", ReasonNotUsedWithinRetention, 900}},
		},
		{
			name: "at the threshold nothing goes", now: 30,
			content: []Content{blob("l", 0, 1000)},
			disk:    DiskUsage{UsedBytes: 850, CapacityBytes: 1000}, maxPct: 85,
		},
		{
			name: "an unknown disk evicts by retention only", now: 30,
			content: []Content{blob("l", 0, 1000)},
			disk:    DiskUsage{UsedBytes: 1000}, maxPct: 85,
		},
		{
			name: "a threshold of 0 turns disk eviction off", now: 30,
			content: []Content{blob("l", 0, 1000)},
			disk:    DiskUsage{UsedBytes: 1000, CapacityBytes: 1000},
		},
		{
			name: "ties go by depth, then digest, so a manifest never outlives its content", now: 100,
			content: []Content{blob("l", 0, 1), manifest("m", 0, "l"), manifest("index", 0, "m")},
			want: []evicted{{"index", ReasonNotUsedWithinRetention, 0}, {"m", ReasonNotUsedWithinRetention, 0},
				{"l", ReasonNotUsedWithinRetention, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(Input{Now: at(tt.now), Retention: retention, Content: tt.content, Pinned: tt.pinned,
				Disk: tt.disk, MaxDiskPercent: tt.maxPct, MinAge: tt.minAge})
			var want []Eviction
			for _, e := range tt.want {
				size := int64(0)
				for _, c := range tt.content {
					if c.Digest == dg(e.name) {
						size = c.Size
					}
				}
				want = append(want, Eviction{Digest: dg(e.name), Reason: e.reason, LastUse: at(e.lastUse), Size: size})
			}
			assert.Equal(t, want, got.Evict)
			assert.Equal(t, tt.wantPins, got.Pinned)
			assert.Equal(t, tt.wantAbove, got.StillAboveThreshold)
		})
	}
}

func TestDecideStopsOnReferenceCycles(t *testing.T) {
	// Content addressing makes cycles impossible; corrupt records must still not hang.
	content := []Content{manifest("a", 0, "b"), manifest("b", 90, "a")}
	got := Decide(Input{Now: at(100), Retention: 40 * time.Second, Content: content, Pinned: pins("a")})
	assert.Empty(t, got.Evict)
	assert.Equal(t, 2, got.Pinned)
}

func TestDiskUsagePercent(t *testing.T) {
	assert.Equal(t, 0.0, DiskUsage{UsedBytes: 5}.Percent())
	assert.InDelta(t, 85.0, DiskUsage{UsedBytes: 85, CapacityBytes: 100}.Percent(), 1e-9)
}
