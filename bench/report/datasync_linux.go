package main

import (
	"os"
	"syscall"
)

// datasync is fdatasync(2): what ratestore's write-ahead log pays per group
// commit.
func datasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
