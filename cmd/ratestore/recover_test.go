package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/strategies"
	"github.com/stretchr/testify/require"
)

// TestRecoverFlag: a database whose write-ahead log has a damaged record
// in the middle is refused, with a hint to --recover; with it, the command
// runs on every valid record and says on stderr what was dropped.
func TestRecoverFlag(t *testing.T) {
	src := newEnv(t)
	db, err := ratestore.Open(src.db, ratestore.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	l, err := db.Limiter("rps", strategies.TokenBucket{Rate: 1e-6, Burst: 100})
	require.NoError(t, err)
	for i := range 10 {
		_, err := l.Allow(context.Background(), fmt.Sprint("k", i)) // one synced log record each
		require.NoError(t, err)
	}
	// What a crash leaves: both files as they are now, the log not yet
	// merged into the bbolt file; one byte of the log's fifth record
	// damaged.
	e := newEnv(t)
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(src.db + suffix)
		require.NoError(t, err)
		if suffix == "-wal" {
			off := 32 // the header
			for range 4 {
				off += 8 + int(binary.LittleEndian.Uint32(b[off:]))
			}
			b[off+12] ^= 0x20 // inside the fifth record's sequence number
		}
		require.NoError(t, os.WriteFile(e.db+suffix, b, 0o600))
	}
	require.NoError(t, db.Close())

	r := e.run("inspect", "rps", "k9")
	require.Equal(t, exitError, r.code, r.stdout)
	require.Contains(t, r.stderr, filepath.Base(e.db)+"-wal")
	require.Contains(t, r.stderr, "--recover opens it")

	r = e.ok("--recover", "inspect", "rps", "k9")
	require.Contains(t, r.stderr, "ratestore: warning: "+e.db+"-wal: dropped 1 damaged record (")
	require.Contains(t, r.stdout, "tokens: 99", "a record after the damage is kept")
	r = e.ok("inspect", "rps", "k4")
	require.Contains(t, r.stdout, "no stored state", "the damaged record's state is gone")
	r = e.ok("inspect", "rps", "k3")
	require.Contains(t, r.stdout, "tokens: 99", "a record before the damage is kept")
}
