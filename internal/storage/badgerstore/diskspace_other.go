//go:build !linux

package badgerstore

// freeSpace is not measured on this system: Commit refuses nothing (see
// checkSpace), and a full disk may crash the process as badger alone does.
func freeSpace(string) (int64, bool) { return 0, false }

func unallocated(string, string, int64) int64 { return 0 }
