package retention

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/opencontainers/go-digest"
)

// Kind tells how a digest is stored: a manifest has revision links (and maybe tags), a blob layer links.
type Kind uint8

const (
	KindBlob Kind = iota
	KindManifest
)

// Records is the last use of every cached digest — the only state the retention keeps.
// The middleware (UsedManifest, UsedBlob), the startup scan (Restore) and the eviction pass
// (SetSize, Forget, UsedUntil when a pin goes) write it; the eviction pass (Snapshot) and
// the state file writer (LastUses) read it. A restart loses the uses since the last save
// (every save interval and at shutdown): that content keeps its previous last use, or gets
// the start time. Missing knowledge only ever keeps content longer.
type Records struct {
	clock   Clock
	traffic *Traffic // blob pulls by hit and miss; New sets it before the registry serves (else nil)

	mu       sync.Mutex
	byDigest map[digest.Digest]*record
	names    map[string]string // interns repository names: thousands of records share a few strings
	dirty    bool
}

// Traffic returns the blob pull counts, or nil when nothing counts them.
func (r *Records) Traffic() *Traffic { return r.traffic }

type record struct {
	lastUse int64 // Unix nanoseconds
	size    int64 // bytes; 0 until the eviction pass looked
	kind    Kind
	repos   []string
	refs    []digest.Digest
}

// NewRecords returns empty records that timestamp uses with clock.
func NewRecords(clock Clock) *Records {
	return &Records{clock: clock, byDigest: map[digest.Digest]*record{}, names: map[string]string{}}
}

// UsedManifest records that the manifest d of repo was served now. refs is called only
// the first time: a digest's references never change.
func (r *Records) UsedManifest(repo string, d digest.Digest, refs func() []digest.Digest) {
	now := r.clock.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.use(repo, d, now)
	rec.kind = KindManifest
	if rec.refs == nil && refs != nil {
		rec.refs = refs()
	}
}

// UsedBlob records that the blob d of repo was served now.
func (r *Records) UsedBlob(repo string, d digest.Digest) {
	now := r.clock.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.use(repo, d, now)
}

func (r *Records) use(repo string, d digest.Digest, now int64) *record {
	rec, ok := r.byDigest[d]
	if !ok {
		rec = &record{}
		r.byDigest[d] = rec
	}
	rec.lastUse = max(rec.lastUse, now)
	r.addRepo(rec, repo)
	r.dirty = true
	return rec
}

func (r *Records) addRepo(rec *record, repo string) {
	if repo == "" || slices.Contains(rec.repos, repo) {
		return
	}
	if _, ok := r.names[repo]; !ok {
		r.names[repo] = repo
	}
	rec.repos = append(rec.repos, r.names[repo])
}

// UsedUntil records that d was in use until t without being pulled (it was pinned: pods
// ran it). Content not recorded is left alone.
func (r *Records) UsedUntil(d digest.Digest, t time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.byDigest[d]
	if !ok || rec.lastUse >= t.UnixNano() {
		return
	}
	rec.lastUse = t.UnixNano()
	r.dirty = true
}

// Found is content the startup scan found in storage.
type Found struct {
	Digest digest.Digest
	Kind   Kind
	Repos  []string
	Refs   []digest.Digest
}

// Restore adds the content found in storage with its saved last use, or now if the state
// file does not know it (a cache written by plain distribution, or before the first save):
// an upgraded cache keeps everything for at least one retention. Uses recorded while the
// scan ran win over older saved times. It counts the digests with a saved time and without.
func (r *Records) Restore(found []Found, saved map[digest.Digest]time.Time) (known, unknown int) {
	now := r.clock.Now().UnixNano()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range found {
		last := now
		if t, ok := saved[f.Digest]; ok {
			last = t.UnixNano()
			known++
		} else {
			unknown++
		}
		rec := r.use("", f.Digest, last)
		if f.Kind == KindManifest {
			rec.kind = KindManifest
		}
		for _, repo := range f.Repos {
			r.addRepo(rec, repo)
		}
		if rec.refs == nil && len(f.Refs) > 0 {
			rec.refs = slices.Clone(f.Refs)
		}
	}
	r.dirty = true
	return known, unknown
}

// Entry is a copy of one record.
type Entry struct {
	Content
	Kind  Kind
	Repos []string
}

// Snapshot copies the records for an eviction decision, ordered by digest.
func (r *Records) Snapshot() []Entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Entry, 0, len(r.byDigest))
	for d, rec := range r.byDigest {
		out = append(out, Entry{
			Content: Content{Digest: d, LastUse: time.Unix(0, rec.lastUse).UTC(), Size: rec.size, Refs: rec.refs},
			Kind:    rec.kind,
			Repos:   slices.Clone(rec.repos),
		})
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Digest, b.Digest) })
	return out
}

// SetSize records the size of d.
func (r *Records) SetSize(d digest.Digest, size int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec, ok := r.byDigest[d]; ok {
		rec.size = size
	}
}

// Forget drops the record of d unless it was used after lastUse (the use the eviction
// decided on): content pulled again while being evicted keeps its record.
func (r *Records) Forget(d digest.Digest, lastUse time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.byDigest[d]
	if !ok || rec.lastUse > lastUse.UnixNano() {
		return false
	}
	delete(r.byDigest, d)
	r.dirty = true
	return true
}

// Len is the number of records.
func (r *Records) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.byDigest)
}

// LastUses copies every last use for the state file, marks the records clean and says whether they were dirty.
func (r *Records) LastUses() (lastUse map[digest.Digest]time.Time, dirty bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[digest.Digest]time.Time, len(r.byDigest))
	for d, rec := range r.byDigest {
		out[d] = time.Unix(0, rec.lastUse).UTC()
	}
	dirty = r.dirty
	r.dirty = false
	return out, dirty
}

// MarkDirty makes the next LastUses report a change (after a failed save).
func (r *Records) MarkDirty() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dirty = true
}
