package ratestore

import (
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/internal/storage"
)

// Stats is what a DB holds and has done since Open: what an operator
// graphs (package ratestore/promstats exports it to Prometheus). The
// counters only grow. The gauges are summed over the shards one lock at a
// time, so under load they are a near-instant picture, not an atomic one.
type Stats struct {
	// CachedKeys is the number of states in memory: the keys used lately,
	// each under its limiter, at most about Options.MaxCachedKeys.
	CachedKeys int
	// DirtyKeys is the number of cached states changed since they were
	// last written: what the next commit writes.
	DirtyKeys int
	// Loads counts reads from the store of keys not in memory, whether
	// or not a state was stored; Evictions counts states dropped from
	// memory to stay within Options.MaxCachedKeys (a state is evicted only
	// once its latest change is on disk).
	Loads, Evictions uint64
	// Commits counts the commits that had something to write, and
	// CommitErrors those of them that failed; CommittedOps the states and
	// records they wrote or deleted.
	Commits, CommitErrors, CommittedOps uint64
	// CommitTime is the time those commits took, writing and syncing:
	// CommitTime/Commits is their mean latency. LastCommitTime is the
	// latest one's.
	CommitTime, LastCommitTime time.Duration
	// DiskBytes is the size of the database's files (the bbolt file and its
	// write-ahead log, or the badger directory's tables and value logs), or
	// -1 when the backend cannot tell.
	DiskBytes int64
}

// Stats returns the DB's statistics. It may be called at any time, also
// after Close (the gauges are then 0, DiskBytes -1).
func (db *DB) Stats() Stats {
	st := Stats{
		Loads:          db.loads.Load(),
		Evictions:      db.evictions.Load(),
		Commits:        db.stats.commits.Load(),
		CommitErrors:   db.stats.errors.Load(),
		CommittedOps:   db.stats.ops.Load(),
		CommitTime:     time.Duration(db.stats.nanos.Load()),
		LastCommitTime: time.Duration(db.stats.last.Load()),
		DiskBytes:      -1,
	}
	if db.closed.Load() {
		return st
	}
	for i := range db.shards {
		sh := &db.shards[i]
		sh.mu.Lock()
		st.CachedKeys += sh.live
		st.DirtyKeys += len(sh.dirty)
		sh.mu.Unlock()
	}
	if s, ok := db.store.(storage.Sizer); ok {
		if n, err := s.Size(); err == nil {
			st.DiskBytes = n
		}
	}
	return st
}

// commitStats are the committer's counters (see Stats).
type commitStats struct {
	commits, errors, ops atomic.Uint64
	nanos, last          atomic.Int64
}

// record counts one commit of n ops that took d and failed with err.
func (c *commitStats) record(n int, d time.Duration, err error) {
	c.commits.Add(1)
	if err != nil {
		c.errors.Add(1)
	}
	c.ops.Add(uint64(n))
	c.nanos.Add(int64(d))
	c.last.Store(int64(d))
}
