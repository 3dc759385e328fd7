package main

import (
	"bufio"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// entry is one member of a layer: a directory, a regular file (its content from src, or data)
// or a symlink to target.
type entry struct {
	typeflag byte // tarDir, tarReg, tarSymlink
	mode     int64
	uid, gid int
	src      string
	data     []byte
	target   string
}

const (
	tarReg     = '0'
	tarSymlink = '2'
	tarDir     = '5'
)

// tree is a layer's file system, keyed by relative path ("etc/passwd"). Parent directories
// are implicit (0755, 0:0) unless added.
type tree map[string]*entry

func (t tree) dir(p string, mode int64) *entry {
	e := &entry{typeflag: tarDir, mode: mode}
	t[p] = e
	return e
}

func (t tree) data(p string, data string) {
	t[p] = &entry{typeflag: tarReg, mode: 0o644, data: []byte(data)}
}

func (t tree) symlink(p, target string) {
	t[p] = &entry{typeflag: tarSymlink, mode: 0o777, target: target}
}

// file adds the local file src at p: 0755 if its owner may execute it, else 0644 (a checkout
// with umask 022, whatever the local modes are).
func (t tree) file(p, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	mode := int64(0o644)
	if fi.Mode()&0o100 != 0 {
		mode = 0o755
	}
	t[p] = &entry{typeflag: tarReg, mode: mode, src: src}
	return nil
}

// copyDir adds the contents of the local directory src under p (cp -R src/. p/). With keepModes
// the local permissions stay (a directory a tool wrote), else they are normalised as by file.
func (t tree) copyDir(p, src string, keepModes bool) error {
	return filepath.WalkDir(src, func(local string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, local)
		dest := path.Join(p, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			e := t.dir(dest, 0o755)
			if keepModes {
				e.mode = int64(fi.Mode().Perm())
			}
		case fi.Mode().IsRegular():
			if err := t.file(dest, local); err != nil {
				return err
			}
			if keepModes {
				t[dest].mode = int64(fi.Mode().Perm())
			}
		default:
			return fmt.Errorf("%s: neither a file nor a directory", local)
		}
		return nil
	})
}

// write writes t as GNU tar writes it with --format=gnu --sort=name --mtime=@0
// --numeric-owner: entries depth-first, each directory's entries in byte order, the members
// named in last (entries of another owner, appended by tar --append before) at the end; the
// archive padded to tar's 10240-byte records. The bytes, hence the layer digests, are those
// of the GNU tar 1.34 layers of the former hack/images/build.sh.
func (t tree) write(file string, last ...string) error {
	children, seen := map[string][]string{}, map[string]bool{}
	for _, p := range slices.Collect(maps.Keys(t)) {
		for d := p; d != "." && !seen[d]; d = path.Dir(d) {
			seen[d] = true
			children[path.Dir(d)] = append(children[path.Dir(d)], d)
			if t[d] == nil {
				t.dir(d, 0o755)
			}
		}
	}
	var order []string
	var walk func(string)
	walk = func(dir string) {
		kids := children[dir]
		slices.SortFunc(kids, func(a, b string) int { return strings.Compare(path.Base(a), path.Base(b)) })
		for _, k := range kids {
			if !slices.Contains(last, k) {
				order = append(order, k)
				walk(k)
			}
		}
	}
	walk(".")
	order = append(order, last...)

	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := &countingWriter{w: bufio.NewWriterSize(f, 1<<20)}
	for _, p := range order {
		if err := t[p].writeTo(w, p); err != nil {
			f.Close()
			return fmt.Errorf("%s: %s: %w", file, p, err)
		}
	}
	end := 1024 + (10240-(w.n+1024)%10240)%10240 // two zero blocks, then the record's rest
	if _, err := w.Write(make([]byte, end)); err != nil {
		f.Close()
		return err
	}
	if err := w.w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// materialize writes t's directories and files under dir, with their modes.
func (t tree) materialize(dir string) error {
	for _, p := range slices.Sorted(maps.Keys(t)) {
		e, local := t[p], filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
			return err
		}
		var err error
		switch e.typeflag {
		case tarDir:
			err = os.MkdirAll(local, 0o755)
		case tarReg:
			data := e.data
			if e.src != "" {
				data, err = os.ReadFile(e.src)
			}
			if err == nil {
				err = os.WriteFile(local, data, 0o600)
			}
		default:
			err = fmt.Errorf("%s: not a file or directory", p)
		}
		if err == nil {
			err = os.Chmod(local, fs.FileMode(e.mode&0o777))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// writeTo writes e's GNU header (magic "ustar  ", no user or group names, mtime 0, device
// fields left empty as GNU tar leaves them; archive/tar fills those with zeros, hence this) and
// its content.
func (e *entry) writeTo(w io.Writer, p string) error {
	name := p
	if e.typeflag == tarDir {
		name += "/"
	}
	if len(name) >= 100 || len(e.target) >= 100 {
		return fmt.Errorf("name longer than 99 bytes: GNU long names are not written")
	}
	var size int64
	var body io.Reader
	switch {
	case e.typeflag != tarReg:
	case e.src != "":
		f, err := os.Open(e.src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		size, body = fi.Size(), f
	default:
		size, body = int64(len(e.data)), strings.NewReader(string(e.data))
	}
	var h [512]byte
	octal := func(field []byte, v int64) { copy(field, fmt.Sprintf("%0*o\x00", len(field)-1, v)) }
	copy(h[0:100], name)
	octal(h[100:108], e.mode)
	octal(h[108:116], int64(e.uid))
	octal(h[116:124], int64(e.gid))
	octal(h[124:136], size)
	octal(h[136:148], 0)
	copy(h[148:156], "        ")
	h[156] = e.typeflag
	copy(h[157:257], e.target)
	copy(h[257:265], "ustar  \x00")
	sum := int64(0)
	for _, b := range h {
		sum += int64(b)
	}
	copy(h[148:156], fmt.Sprintf("%06o\x00 ", sum))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	if n, err := io.Copy(w, body); err != nil || n != size {
		return fmt.Errorf("copied %d of %d bytes: %v", n, size, err)
	}
	_, err := w.Write(make([]byte, (512-size%512)%512))
	return err
}
