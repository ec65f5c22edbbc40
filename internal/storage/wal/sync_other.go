//go:build !linux

package wal

import "os"

// fdatasync falls back to a full fsync where there is no fdatasync.
func fdatasync(f *os.File) error { return f.Sync() }

// syncDir syncs dir where the system allows it; not every system can open
// a directory for syncing (Windows), and there a rename is durable once the
// file system says so.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return nil
	}
	d.Sync()
	return d.Close()
}
