package badgerstore

import (
	"fmt"
	"syscall"

	"github.com/ratestore/ratestore/internal/storage"
)

// opOverhead is what badger adds to a key and value in its memtable log:
// a header, the version and a checksum, rounded up.
const opOverhead = 32

// checkSpace refuses a Commit of ops, with an error wrapping
// syscall.ENOSPC, when the file system holding the database has less free
// space than diskReserve: badger could otherwise fault on a page of one of
// its memory-mapped files (SIGBUS) before this process gets to check again.
// Where free space cannot be measured (freeSpace's ok is false), nothing is
// refused.
func (s *Store) checkSpace(ops []storage.Op) error {
	var size int64
	for _, op := range ops {
		size += int64(len(op.Key)+len(op.Value)) + opOverhead
	}
	free, ok := freeSpace(s.path)
	// Fast path: more than the reserve can ever be, whatever the files.
	if !ok || free >= s.maxReserve()+2*size {
		return nil
	}
	need := s.diskReserve(size)
	if free >= need {
		return nil
	}
	return fmt.Errorf("badger %s: commit of %d ops refused: %d bytes free on its file system, %d needed to write without risking a crash (SIGBUS on badger's memory maps): %w",
		s.path, len(ops), free, need, syscall.ENOSPC)
}

// reserveMemtables is how many memtables' worth of new files a commit may
// set off in the background beyond its own bytes: flushing the memtable
// into a level 0 table, and a compaction of level 0 (two tables, as
// Options sets) into level 1 whose output is written before its inputs
// are deleted.
const reserveMemtables = 4

// maxMemFiles bounds the memtable logs (.mem) a database has: the
// mutable memtable and the immutable ones waiting to be flushed
// (NumMemtables in Options), plus one being created.
const maxMemFiles = 3

// maxReserve bounds diskReserve less the commit's own bytes.
func (s *Store) maxReserve() int64 {
	return (reserveMemtables + maxMemFiles) * s.memTableSize
}

// diskReserve is the free space a commit of size bytes needs: twice its
// size (the memtable log, and the value log for large values), what badger
// may still write into the unallocated part of its sparse memtable logs
// (each written up to the memtable size), and room for a flush and a
// compaction.
func (s *Store) diskReserve(size int64) int64 {
	return 2*size + unallocated(s.path, ".mem", s.memTableSize) + reserveMemtables*s.memTableSize
}
