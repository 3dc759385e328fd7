package retention

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeLastUse(t *testing.T) {
	var buf bytes.Buffer
	require.NoError(t, EncodeLastUse(&buf, map[digest.Digest]time.Time{
		dg("b"): at(90),
		dg("a"): at(25).Add(700 * time.Millisecond), // seconds are kept
	}))
	first, second := dg("a"), dg("b")
	if second < first {
		first, second = second, first
	}
	want := map[digest.Digest]int64{dg("a"): at(25).Unix(), dg("b"): at(90).Unix()}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, stateHeader, lines[0])
	assert.Equal(t, first.String()+" "+strconv.FormatInt(want[first], 10), lines[1])
	assert.Equal(t, second.String()+" "+strconv.FormatInt(want[second], 10), lines[2])
}

func TestDecodeLastUse(t *testing.T) {
	a, b := dg("a"), dg("b")
	tests := []struct {
		name    string
		in      string
		want    map[digest.Digest]time.Time
		wantErr string
	}{
		{name: "header only", in: stateHeader + "\n", want: map[digest.Digest]time.Time{}},
		{
			name: "digests with comments and blank lines",
			in:   stateHeader + "\n\n# saved by hand\n" + a.String() + " 1735689625\n  " + b.String() + "\t1735689690  \n",
			want: map[digest.Digest]time.Time{a: time.Unix(1735689625, 0).UTC(), b: time.Unix(1735689690, 0).UTC()},
		},
		{
			name: "a digest twice keeps the later use",
			in:   stateHeader + "\n" + a.String() + " 20\n" + a.String() + " 10\n",
			want: map[digest.Digest]time.Time{a: time.Unix(20, 0).UTC()},
		},
		{name: "empty file", in: "", wantErr: "empty state file"},
		{name: "no header", in: a.String() + " 10\n", wantErr: "line 1: want header"},
		{name: "another version", in: "# quartet mirror-registry last-use v2\n", wantErr: "line 1: want header"},
		{name: "bad digest", in: stateHeader + "\nsha256:abc 10\n", wantErr: "line 2:"},
		{name: "bad time", in: stateHeader + "\n" + a.String() + " yesterday\n", wantErr: "line 2:"},
		{name: "extra field", in: stateHeader + "\n" + a.String() + " 10 manifest\n", wantErr: "line 2: want"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeLastUse(strings.NewReader(tt.in))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestStateFileRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "quartet", "last-use")
	got, err := readStateFile(path)
	require.NoError(t, err, "a missing state file is an empty state")
	assert.Empty(t, got)

	want := map[digest.Digest]time.Time{dg("a"): time.Unix(at(25).Unix(), 0).UTC(), dg("b"): time.Unix(at(90).Unix(), 0).UTC()}
	require.NoError(t, writeStateFile(path, want))
	require.NoError(t, writeStateFile(path, want), "replacing an existing file")
	got, err = readStateFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, got)

	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")
}

func FuzzDecodeLastUse(f *testing.F) {
	f.Add(stateHeader + "\n" + dg("a").String() + " 1735689625\n")
	f.Add(stateHeader + "\n# c\n\n" + dg("b").String() + " -5\n")
	f.Add("garbage")
	f.Fuzz(func(t *testing.T, in string) {
		got, err := DecodeLastUse(strings.NewReader(in))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		require.NoError(t, EncodeLastUse(&buf, got))
		again, err := DecodeLastUse(&buf)
		require.NoError(t, err, "what was decoded encodes to a valid file")
		assert.Equal(t, got, again)
	})
}
