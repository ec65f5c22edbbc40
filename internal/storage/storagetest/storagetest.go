// Package storagetest holds what the tests of the storage backends, and of
// the packages built on them, share: a snapshot of a database's files, to
// show that a read-only open left every byte and every modification time
// as it found them.
package storagetest

import (
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
