package retention

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/opencontainers/go-digest"
)

// ParsePins reads the pinned digests, one a line: a bare digest ("sha256:…") or an image
// reference by digest, as a pod's status.containerStatuses[].imageID has it
// ("docker.io/library/nginx@sha256:…", "docker-pullable://…@sha256:…"). Blank lines and
// '#' comments are skipped. Lines that hold no valid digest are returned, not fatal: one
// bad line must not unpin the rest.
func ParsePins(r io.Reader) (pins map[digest.Digest]bool, invalid []string, err error) {
	pins = map[digest.Digest]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if i := strings.LastIndexByte(text, '@'); i >= 0 {
			text = text[i+1:]
		}
		d, perr := digest.Parse(text)
		if perr != nil {
			invalid = append(invalid, sc.Text())
			continue
		}
		pins[d] = true
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return pins, invalid, nil
}

// pinFile re-reads the pinned-digests file when it changes (another inode — a ConfigMap
// update swaps a symlink — or another size or modification time).
type pinFile struct {
	path string
	seen os.FileInfo
	pins map[digest.Digest]bool
}

// load returns the current pins. A missing file pins nothing. A file that cannot be read
// keeps the pins read before, and the error says so; the caller then evicts nothing.
func (p *pinFile) load() (pins map[digest.Digest]bool, changed bool, invalid []string, err error) {
	if p.path == "" {
		return nil, false, nil, nil
	}
	fi, err := os.Stat(p.path)
	if os.IsNotExist(err) {
		changed = p.seen != nil || p.pins == nil
		p.seen, p.pins = nil, map[digest.Digest]bool{}
		return p.pins, changed, nil, nil
	}
	if err != nil {
		return p.pins, false, nil, fmt.Errorf("pinned digests file: %w", err)
	}
	if p.seen != nil && os.SameFile(p.seen, fi) && fi.Size() == p.seen.Size() && fi.ModTime().Equal(p.seen.ModTime()) {
		return p.pins, false, nil, nil
	}
	f, err := os.Open(p.path)
	if err != nil {
		return p.pins, false, nil, fmt.Errorf("pinned digests file: %w", err)
	}
	defer f.Close()
	pins, invalid, err = ParsePins(f)
	if err != nil {
		return p.pins, false, nil, fmt.Errorf("pinned digests file %s: %w", p.path, err)
	}
	p.seen, p.pins = fi, pins
	return pins, true, invalid, nil
}
