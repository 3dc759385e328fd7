package main

import (
	"archive/tar"
	"cmp"
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

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one member of a layer: its header (type, mode, owner, link target) and, for a
// regular file, its content from the local file src or data.
type entry struct {
	tar.Header
	src, data string
}

// tree is a layer's file system, keyed by relative path ("etc/passwd"). Parent directories
// are implicit (0755, 0:0) unless added.
type tree map[string]*entry

func (t tree) dir(p string, mode int64) *entry {
	t[p] = &entry{Header: tar.Header{Typeflag: tar.TypeDir, Mode: mode}}
	return t[p]
}

func (t tree) data(p, data string) {
	t[p] = &entry{Header: tar.Header{Typeflag: tar.TypeReg, Mode: 0o644}, data: data}
}

func (t tree) symlink(p, target string) {
	t[p] = &entry{Header: tar.Header{Typeflag: tar.TypeSymlink, Mode: 0o777, Linkname: target}}
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
	t[p] = &entry{Header: tar.Header{Typeflag: tar.TypeReg, Mode: mode}, src: src}
	return nil
}

// copyDir adds the contents of the local directory src under p (cp -R src/. p/). With keepModes
// the local permissions stay (a directory a tool wrote), else they are normalised as by file.
func (t tree) copyDir(p, src string, keepModes bool) error {
	return filepath.WalkDir(src, func(local string, d fs.DirEntry, err error) error {
		var fi fs.FileInfo
		if err == nil {
			fi, err = d.Info()
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, local)
		dest := path.Join(p, filepath.ToSlash(rel))
		switch {
		case d.IsDir():
			t.dir(dest, 0o755)
		case fi.Mode().IsRegular():
			err = t.file(dest, local)
		default:
			return fmt.Errorf("%s: neither a file nor a directory", local)
		}
		if keepModes && err == nil {
			t[dest].Mode = int64(fi.Mode().Perm())
		}
		return err
	})
}

// writeTar writes t with archive/tar, reproducibly: depth-first, each directory's entries in
// byte order, root's entries first (another owner's at the end), GNU headers with mtime 0 and
// numeric owners only.
func (t tree) writeTar(w io.Writer) error {
	all := maps.Clone(t)
	for p := range t {
		for d := path.Dir(p); d != "." && all[d] == nil; d = path.Dir(d) {
			all[d] = &entry{Header: tar.Header{Typeflag: tar.TypeDir, Mode: 0o755}}
		}
	}
	order := slices.SortedFunc(maps.Keys(all), func(a, b string) int {
		return cmp.Or(cmp.Compare(all[a].Uid, all[b].Uid), slices.Compare(strings.Split(a, "/"), strings.Split(b, "/")))
	})
	tw := tar.NewWriter(w)
	for _, p := range order {
		if err := all[p].writeTo(tw, p); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
	}
	return tw.Close()
}

// layer is t as an OCI layer whose tar is written anew whenever it is read.
func (t tree) layer() (v1.Layer, error) {
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		r, w := io.Pipe()
		go func() { w.CloseWithError(t.writeTar(w)) }()
		return r, nil
	}, tarball.WithMediaType(types.OCILayer))
}

func (e *entry) writeTo(tw *tar.Writer, p string) error {
	h := e.Header
	h.Name, h.ModTime, h.Format, h.Size = p, time.Unix(0, 0), tar.FormatGNU, int64(len(e.data))
	if h.Typeflag == tar.TypeDir {
		h.Name += "/"
	}
	var body io.Reader = strings.NewReader(e.data)
	if e.src != "" {
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
	}
	if err := tw.WriteHeader(&h); err != nil {
		return err
	}
	_, err := io.Copy(tw, body)
	return err
}
