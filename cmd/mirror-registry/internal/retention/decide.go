package retention

import (
	"cmp"
	"slices"
	"time"

	"github.com/opencontainers/go-digest"
)

// Reason says why content is evicted; it appears unchanged in logs and metric labels.
type Reason string

const (
	// ReasonNotUsedWithinRetention: neither it nor an image referencing it was pulled within the retention.
	ReasonNotUsedWithinRetention Reason = "NotUsedWithinRetention"
	// ReasonDiskAboveThreshold: the disk is fuller than allowed and it is among the least recently used.
	ReasonDiskAboveThreshold Reason = "DiskAboveThreshold"
)

// Content is one cached manifest or blob as the decision sees it.
type Content struct {
	Digest  digest.Digest
	LastUse time.Time       // when a client last pulled this digest itself
	Size    int64           // bytes on disk (0 when not known yet)
	Refs    []digest.Digest // what a manifest references (an index's manifests, an image's config and layers)
}

// DiskUsage is the storage volume's fill; a zero capacity is unknown: nothing is evicted for disk space.
type DiskUsage struct {
	UsedBytes     uint64
	CapacityBytes uint64
}

// Percent is the used share of the capacity, 0-100.
func (u DiskUsage) Percent() float64 {
	if u.CapacityBytes == 0 {
		return 0
	}
	return float64(u.UsedBytes) * 100 / float64(u.CapacityBytes)
}

// Input is everything one eviction decision depends on.
type Input struct {
	Now            time.Time
	Retention      time.Duration
	Content        []Content
	Pinned         map[digest.Digest]bool // never evicted, nor anything they reference, however deep
	Disk           DiskUsage
	MaxDiskPercent float64 // the fill above which the least recently used content goes first
	// MinAge protects what was used (or pinned) within it before Now from eviction for disk
	// space, as the kubelet's imageMinimumGCAge does for images; retention is not affected.
	MinAge time.Duration
}

// Eviction is one digest to delete.
type Eviction struct {
	Digest  digest.Digest
	Reason  Reason
	LastUse time.Time // effective: the latest pull of the digest or of a manifest referencing it
	Size    int64
}

// Decision is what to delete, in order, and why the rest stays.
type Decision struct {
	Evict  []Eviction
	Pinned int // recorded digests kept because a pinned digest is, or references, them
	// StillAboveThreshold: evicting every unpinned digest not used within MinAge would not
	// bring the disk below the threshold (or the sizes are unknown).
	StillAboveThreshold bool
}

// Decide chooses what to evict. A digest's effective last use is the latest pull of itself
// or of any manifest above it: the layers of an image pulled daily stay. Pinned digests and
// all they reference stay. First goes everything not used within the retention; then, while
// the disk is above MaxDiskPercent, the least recently used, but nothing used within MinAge.
// A manifest goes before what it references, so a kept manifest never lacks its content.
func Decide(in Input) Decision {
	graph := newContentGraph(in.Content)
	pinned := graph.closure(in.Pinned)
	lastUse, depth := graph.effectiveLastUse()

	order := make([]int, 0, len(in.Content))
	for i, c := range in.Content {
		if !pinned[c.Digest] {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(lastUse[a].Compare(lastUse[b]), cmp.Compare(depth[a], depth[b]),
			cmp.Compare(in.Content[a].Digest, in.Content[b].Digest))
	})

	d := Decision{Pinned: len(pinned)}
	expireBefore := in.Now.Add(-in.Retention)
	next := 0
	var freed uint64
	for ; next < len(order) && lastUse[order[next]].Before(expireBefore); next++ {
		i := order[next]
		d.Evict = append(d.Evict, eviction(in.Content[i], ReasonNotUsedWithinRetention, lastUse[i]))
		freed += uint64(max(in.Content[i].Size, 0))
	}

	if in.Disk.CapacityBytes == 0 || in.MaxDiskPercent <= 0 {
		return d
	}
	allowed := uint64(float64(in.Disk.CapacityBytes) * min(in.MaxDiskPercent, 100) / 100)
	used := in.Disk.UsedBytes - min(freed, in.Disk.UsedBytes)
	protectFrom := in.Now.Add(-in.MinAge)
	for ; used > allowed && next < len(order) && (in.MinAge <= 0 || lastUse[order[next]].Before(protectFrom)); next++ {
		i := order[next]
		d.Evict = append(d.Evict, eviction(in.Content[i], ReasonDiskAboveThreshold, lastUse[i]))
		used -= min(uint64(max(in.Content[i].Size, 0)), used)
	}
	d.StillAboveThreshold = used > allowed
	return d
}

func eviction(c Content, r Reason, lastUse time.Time) Eviction {
	return Eviction{Digest: c.Digest, Reason: r, LastUse: lastUse, Size: c.Size}
}

// contentGraph is the references between recorded digests (index → manifests → config and
// layers). Content addressing makes it acyclic; the loops below are bounded anyway.
type contentGraph struct {
	content []Content
	index   map[digest.Digest]int
}

// maxDepth bounds the reference chains followed (index → manifest → blob is 2).
const maxDepth = 16

func newContentGraph(content []Content) contentGraph {
	index := make(map[digest.Digest]int, len(content))
	for i, c := range content {
		index[c.Digest] = i
	}
	return contentGraph{content: content, index: index}
}

// closure returns the recorded digests that are roots or reachable from them.
func (g contentGraph) closure(roots map[digest.Digest]bool) map[digest.Digest]bool {
	out := make(map[digest.Digest]bool, len(roots))
	var frontier []digest.Digest
	for d := range roots {
		if _, ok := g.index[d]; ok {
			out[d] = true
			frontier = append(frontier, d)
		}
	}
	for depth := 0; len(frontier) > 0 && depth < maxDepth; depth++ {
		var next []digest.Digest
		for _, d := range frontier {
			for _, ref := range g.content[g.index[d]].Refs {
				if _, ok := g.index[ref]; ok && !out[ref] {
					out[ref] = true
					next = append(next, ref)
				}
			}
		}
		frontier = next
	}
	return out
}

// effectiveLastUse returns, by position, each digest's latest use of itself or of any
// manifest referencing it, and its depth below the topmost recorded manifest.
func (g contentGraph) effectiveLastUse() ([]time.Time, []int) {
	lastUse := make([]time.Time, len(g.content))
	depth := make([]int, len(g.content))
	for i, c := range g.content {
		lastUse[i] = c.LastUse
	}
	for round := 0; round < maxDepth; round++ {
		changed := false
		for i, c := range g.content {
			for _, ref := range c.Refs {
				j, ok := g.index[ref]
				if !ok || j == i {
					continue
				}
				if lastUse[j].Before(lastUse[i]) {
					lastUse[j] = lastUse[i]
					changed = true
				}
				if depth[j] < depth[i]+1 {
					depth[j] = depth[i] + 1
					changed = true
				}
			}
		}
		if !changed {
			break
		}
	}
	return lastUse, depth
}
