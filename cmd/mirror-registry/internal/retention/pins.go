package retention

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
)

// Pin is one line of the pinned-digests file: a digest, and the repository the line names ("" if none).
type Pin struct {
	Repository string // the path in the mirror (the upstream's: "library/nginx"), without a registry host
	// Tag is the tag the line names ("repository:tag@digest"), the one a pod's spec
	// names: warming caches it too, so the tag still resolves while the upstream is down.
	Tag    string
	Digest digest.Digest
}

// String is the pin as a line: repository[:tag]@digest, or the bare digest.
func (p Pin) String() string {
	switch {
	case p.Repository == "":
		return p.Digest.String()
	case p.Tag != "":
		return p.Repository + ":" + p.Tag + "@" + p.Digest.String()
	}
	return p.Repository + "@" + p.Digest.String()
}

// ParsePins reads the pinned digests, one a line: a bare digest ("sha256:…") or an image
// reference by digest, as a pod's status.containerStatuses[].imageID has it
// ("docker.io/library/nginx@sha256:…", "docker-pullable://…@sha256:…"). Blank lines and
// '#' comments are skipped. Lines that hold no valid digest are returned, not fatal: one
// bad line must not unpin the rest.
func ParsePins(r io.Reader) (pins map[digest.Digest]bool, invalid []string, err error) {
	images, invalid, err := ParsePinnedImages(r)
	if err != nil {
		return nil, nil, err
	}
	return pinnedDigests(images), invalid, nil
}

func pinnedDigests(images []Pin) map[digest.Digest]bool {
	pins := make(map[digest.Digest]bool, len(images))
	for _, p := range images {
		pins[p.Digest] = true
	}
	return pins
}

// ParsePinnedImages reads the same lines as ParsePins and keeps the repository and tag of
// each (normalised: "nginx" is library/nginx, a registry host is dropped), in file order,
// each line once. A line whose name does not parse still pins its digest, with no repository.
func ParsePinnedImages(r io.Reader) (pins []Pin, invalid []string, err error) {
	seen := map[Pin]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		var name string
		if i := strings.LastIndexByte(text, '@'); i >= 0 {
			name, text = text[:i], text[i+1:]
		}
		d, perr := digest.Parse(text)
		if perr != nil {
			invalid = append(invalid, sc.Text())
			continue
		}
		repo, tag := repositoryPath(name)
		p := Pin{Repository: repo, Tag: tag, Digest: d}
		if !seen[p] {
			seen[p] = true
			pins = append(pins, p)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	return pins, invalid, nil
}

// repositoryPath is the repository of an image name, without its registry host, and its
// tag if it names one; "" when there is no name or it is not one.
func repositoryPath(name string) (repo, tag string) {
	if i := strings.Index(name, "://"); i >= 0 {
		name = name[i+3:] // docker-pullable://
	}
	if name == "" {
		return "", ""
	}
	named, err := reference.ParseNormalizedNamed(name)
	if err != nil {
		return "", ""
	}
	if t, ok := named.(reference.Tagged); ok {
		tag = t.Tag()
	}
	return reference.Path(named), tag
}

// pinFile re-reads the pinned-digests file when it changes (another inode — a ConfigMap
// update swaps a symlink — or another size or modification time).
type pinFile struct {
	path    string
	seen    os.FileInfo
	pins    map[digest.Digest]bool
	images  []Pin  // the lines of the file read last, with their repositories (for warming)
	version uint64 // counts the reads that found the file changed
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
		p.seen, p.pins, p.images = nil, map[digest.Digest]bool{}, nil
		if changed {
			p.version++
		}
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
	images, invalid, err := ParsePinnedImages(f)
	if err != nil {
		return p.pins, false, nil, fmt.Errorf("pinned digests file %s: %w", p.path, err)
	}
	p.seen, p.pins, p.images = fi, pinnedDigests(images), images
	p.version++
	return p.pins, true, invalid, nil
}
