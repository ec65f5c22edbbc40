package badgerstore

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// freeSpace reports the bytes an unprivileged process may still allocate
// on the file system holding dir.
func freeSpace(dir string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * st.Bsize, true
}

// unallocated sums, over the files in dir whose names end in ext, the part
// of each (up to limit) that has no disk blocks behind it yet: a sparse
// file's hole, which a write through a memory map fills, or faults on.
// A file it cannot stat counts as limit: the sum errs on the safe side.
func unallocated(dir, ext string, limit int64) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var sum int64
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ext) {
			continue
		}
		hole := limit
		if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				hole = fi.Size() - st.Blocks*512
			}
		}
		sum += min(max(hole, 0), limit)
	}
	return sum
}
