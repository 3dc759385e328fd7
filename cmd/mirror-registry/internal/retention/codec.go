package retention

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
)

// stateHeader opens the state file; a file without it, or with another version, is not
// read (its content then counts as never recorded, which keeps it one more retention).
const stateHeader = "# quartet mirror-registry last-use v1"

// EncodeLastUse writes the state file: the header, then "<digest> <unix seconds>" lines by
// digest. Seconds suffice for retentions of days and keep it small (about 80 bytes a digest).
func EncodeLastUse(w io.Writer, lastUse map[digest.Digest]time.Time) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, stateHeader)
	for _, d := range slices.Sorted(maps.Keys(lastUse)) {
		fmt.Fprintf(bw, "%s %d\n", d, lastUse[d].Unix())
	}
	return bw.Flush()
}

// DecodeLastUse reads what EncodeLastUse wrote, skipping blank lines and '#' comments;
// any other line that is not "<valid digest> <integer>" fails the whole file, named.
func DecodeLastUse(r io.Reader) (map[digest.Digest]time.Time, error) {
	sc := bufio.NewScanner(r)
	out := map[digest.Digest]time.Time{}
	line, header := 0, false
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if !header {
			if text != stateHeader {
				return nil, fmt.Errorf("line %d: want header %q", line, stateHeader)
			}
			header = true
			continue
		}
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, fmt.Errorf("line %d: want \"<digest> <unix seconds>\", got %d fields", line, len(fields))
		}
		d, err := digest.Parse(fields[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		secs, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		t := time.Unix(secs, 0).UTC()
		if prev, ok := out[d]; !ok || t.After(prev) {
			out[d] = t
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !header {
		return nil, fmt.Errorf("empty state file: want header %q", stateHeader)
	}
	return out, nil
}

// readStateFile returns the saved last uses; a missing file is an empty state.
func readStateFile(path string) (map[digest.Digest]time.Time, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return map[digest.Digest]time.Time{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return DecodeLastUse(f)
}

// writeStateFile replaces path atomically: a crash leaves the old file or the new one.
func writeStateFile(path string, lastUse map[digest.Digest]time.Time) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename there is nothing left to remove
	// cmp.Or evaluates all three: the file is closed whatever failed, and the first error wins.
	if err := cmp.Or(EncodeLastUse(tmp, lastUse), tmp.Sync(), tmp.Close()); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
