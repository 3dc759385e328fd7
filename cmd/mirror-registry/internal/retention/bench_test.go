package retention

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
)

// fillRecords records n digests shaped like a cache: one manifest for every five blobs,
// each manifest referencing a config and four layers, across n/100 repositories.
func fillRecords(r *Records, n int) []digest.Digest {
	ds := make([]digest.Digest, n)
	for i := range ds {
		ds[i] = digest.FromString(fmt.Sprint("content-", i))
	}
	for i, d := range ds {
		repo := fmt.Sprintf("team-%d/app-%d", (i/100)%10, i/100)
		if i%6 == 0 && i+5 < n {
			refsOf := ds[i+1 : i+6]
			r.UsedManifest(repo, d, func() []digest.Digest {
				// Parsed from the manifest's JSON: strings of their own, as in the registry.
				out := make([]digest.Digest, len(refsOf))
				for j, ref := range refsOf {
					out[j] = digest.Digest(strings.Clone(string(ref)))
				}
				return out
			})
			continue
		}
		r.UsedBlob(repo, d)
	}
	return ds
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkRecordsMemory reports the heap the records of 10,000 digests hold (run it with
// a small -benchtime such as 3x: each iteration fills 10,000 records and collects twice).
func BenchmarkRecordsMemory(b *testing.B) {
	var held uint64
	for b.Loop() {
		before := heapInUse()
		r := NewRecords(NewFakeClock(t0))
		fillRecords(r, 10000)
		held = heapInUse() - before
		runtime.KeepAlive(r)
	}
	b.ReportMetric(float64(held), "heapB/10k-records")
}

// BenchmarkRecordUse is the cost the middleware adds to a pull of known content.
func BenchmarkRecordUse(b *testing.B) {
	r := NewRecords(NewFakeClock(t0))
	ds := fillRecords(r, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		r.UsedBlob("team-1/app-1", ds[i%len(ds)])
		i++
	}
}

// BenchmarkRecordUseParallel is the same under concurrent pulls (one lock for all).
func BenchmarkRecordUseParallel(b *testing.B) {
	r := NewRecords(NewFakeClock(t0))
	ds := fillRecords(r, 10000)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r.UsedBlob("team-1/app-1", ds[i%len(ds)])
			i++
		}
	})
}

// BenchmarkDecide is one eviction decision over 10,000 records.
func BenchmarkDecide(b *testing.B) {
	r := NewRecords(NewFakeClock(t0))
	fillRecords(r, 10000)
	entries := r.Snapshot()
	content := make([]Content, len(entries))
	for i, e := range entries {
		content[i] = e.Content
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Decide(Input{Now: t0.Add(time.Hour), Retention: time.Minute, Content: content,
			Disk: DiskUsage{UsedBytes: 90, CapacityBytes: 100}, MaxDiskPercent: 85})
	}
}

// BenchmarkEncodeLastUse is one save of 10,000 last uses.
func BenchmarkEncodeLastUse(b *testing.B) {
	r := NewRecords(NewFakeClock(t0))
	fillRecords(r, 10000)
	lastUse, _ := r.LastUses()
	var size int
	b.ReportAllocs()
	for b.Loop() {
		w := &countingWriter{}
		if err := EncodeLastUse(w, lastUse); err != nil {
			b.Fatal(err)
		}
		size = w.n
	}
	b.ReportMetric(float64(size), "fileB/10k-records")
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }
