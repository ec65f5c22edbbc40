//go:build unix

package badgerstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/ratestore/ratestore/internal/storage"
)

// lockShared takes a shared lock on the badger directory at path, the
// lock badger's read-only open takes (flock on the directory), so that
// what a read-only Open checks before badger opens the directory cannot
// change meanwhile: a writer's exclusive lock is refused until release.
// A writer holding it already fails this with storage.ErrLocked, before
// its open files are taken for a database left by a crash.
func lockShared(path string) (release func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("badger %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("badger %s: %w", path, storage.ErrLocked)
		}
		return nil, fmt.Errorf("badger %s: lock: %w", path, err)
	}
	return func() { f.Close() }, nil
}
