// Package storagetest holds what the tests of the storage backends, and of
// the packages built on them, share: a snapshot of a database's files, to
// show that a read-only open left every byte and every modification time
// as it found them, and a copy of a database's directory.
package storagetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// File is what a Snapshot keeps of one regular file.
type File struct {
	Hash    [sha256.Size]byte
	Size    int64
	ModTime time.Time
}

// Files are the regular files under some paths, by path.
type Files map[string]File

// Snapshot returns every regular file at or under paths (files, or
// directories walked whole), with its SHA-256, size and modification
// time. A path that does not exist contributes nothing, so that a file
// created later shows as a difference. Directories themselves are left
// out: their times change with their contents, which the files show.
func Snapshot(t testing.TB, paths ...string) Files {
	t.Helper()
	out := Files{}
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return nil
			}
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			f, err := hash(p)
			out[p] = f
			return err
		})
		if err != nil {
			t.Fatalf("storagetest: snapshot of %s: %v", root, err)
		}
	}
	return out
}

// hash reads the file at p, streamed: badger's logs are sparse files of
// up to 128 MiB.
func hash(p string) (File, error) {
	f, err := os.Open(p)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return File{}, err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return File{}, err
	}
	return File{Hash: [sha256.Size]byte(h.Sum(nil)), Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// CopyDir copies the files of the directory from into the directory to,
// which it makes if need be, each written sparse (see WriteSparse): what
// copying a database's directory leaves, as a backup does.
func CopyDir(t testing.TB, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o700); err != nil {
		t.Fatalf("storagetest: %v", err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatalf("storagetest: %v", err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatalf("storagetest: %v", err)
		}
		WriteSparse(t, filepath.Join(to, e.Name()), b)
	}
}

// WriteSparse writes b to path leaving holes for its runs of zeros, as
// badger's preallocated logs are: copying them whole costs a hundred MiB
// a copy.
func WriteSparse(t testing.TB, path string, b []byte) {
	t.Helper()
	if err := writeSparse(path, b); err != nil {
		t.Fatalf("storagetest: %v", err)
	}
}

func writeSparse(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	const chunk = 64 << 10
	var zero [chunk]byte
	for off := 0; off < len(b); off += chunk {
		part := b[off:min(off+chunk, len(b))]
		if !bytes.Equal(part, zero[:len(part)]) {
			if _, err := f.WriteAt(part, int64(off)); err != nil {
				return err
			}
		}
	}
	return f.Truncate(int64(len(b)))
}
