package coalesce

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseRange(t *testing.T) {
	const size = 1000
	tests := []struct {
		name   string
		header string
		want   byteRange
		ok     bool
	}{
		{"no header", "", byteRange{}, false},
		{"closed", "bytes=0-99", byteRange{start: 0, length: 100, satisfiable: true}, true},
		{"open", "bytes=900-", byteRange{start: 900, length: 100, satisfiable: true}, true},
		{"end past the size", "bytes=900-5000", byteRange{start: 900, length: 100, satisfiable: true}, true},
		{"suffix", "bytes=-10", byteRange{start: 990, length: 10, satisfiable: true}, true},
		{"suffix longer than the blob", "bytes=-5000", byteRange{start: 0, length: size, satisfiable: true}, true},
		{"start at the size", "bytes=1000-", byteRange{}, true},
		{"empty suffix", "bytes=-0", byteRange{}, true},
		{"several ranges: served whole", "bytes=0-9,20-29", byteRange{}, false},
		{"another unit", "items=0-9", byteRange{}, false},
		{"end before start", "bytes=10-5", byteRange{}, false},
		{"not a number", "bytes=a-5", byteRange{}, false},
		{"no dash", "bytes=5", byteRange{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseRange(tt.header, size)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseRangeOfAnEmptyBlob(t *testing.T) {
	got, ok := parseRange("bytes=0-", 0)
	assert.True(t, ok)
	assert.False(t, got.satisfiable)
}

// FuzzParseRange: a Range header is a client's; whatever it says, a range honoured lies
// within the blob.
func FuzzParseRange(f *testing.F) {
	for _, h := range []string{"bytes=0-99", "bytes=-10", "bytes=5-", "bytes=0-9,20-29", "bytes=9223372036854775807-"} {
		f.Add(h, int64(1000))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			return
		}
		r, ok := parseRange(h, size)
		if !ok || !r.satisfiable {
			assert.Equal(t, byteRange{}, r)
			return
		}
		assert.GreaterOrEqual(t, r.start, int64(0))
		assert.Positive(t, r.length)
		assert.LessOrEqual(t, r.start+r.length, size)
	})
}
