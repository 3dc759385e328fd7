package main

import (
	"archive/tar"
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
	"time"
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
	tarReg     = tar.TypeReg
	tarSymlink = tar.TypeSymlink
	tarDir     = tar.TypeDir
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

// write writes t with archive/tar, reproducibly: entries depth-first, each directory's
// entries in byte order, the members named in last (entries of another owner) at the end,
// every header in GNU format with mtime 0 and numeric owners only.
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
	bw := bufio.NewWriterSize(f, 1<<20)
	tw := tar.NewWriter(bw)
	for _, p := range order {
		if err := t[p].writeTo(tw, p); err != nil {
			f.Close()
			return fmt.Errorf("%s: %s: %w", file, p, err)
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
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

// writeTo writes e's header (GNU format, numeric owners without names, mtime 0) and its
// content to tw.
func (e *entry) writeTo(tw *tar.Writer, p string) error {
	h := &tar.Header{Name: p, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: time.Unix(0, 0), Typeflag: e.typeflag,
		Linkname: e.target, Format: tar.FormatGNU}
	if e.typeflag == tarDir {
		h.Name += "/"
	}
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
		h.Size, body = fi.Size(), f
	default:
		h.Size, body = int64(len(e.data)), strings.NewReader(string(e.data))
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if body == nil {
		return nil
	}
	_, err := io.Copy(tw, body)
	return err
}
