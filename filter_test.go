package ratestore

import (
	"context"
	"fmt"
	"hash/maphash"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/strategies"
)

// TestFilter: a filter says "maybe" for every key it holds, and for about
// 1% of those it does not, in 1.25 bytes a key.
func TestFilter(t *testing.T) {
	const n = 100_000
	f := stored{}
	f.cur.Store(newBloom(n))
	f.ready.Store(true)
	seed := maphash.MakeSeed()
	for i := range n {
		require.False(t, f.add(maphash.String(seed, fmt.Sprint("in", i))))
	}
	require.True(t, f.add(maphash.String(seed, "one more")), "full")
	for i := range n {
		require.True(t, f.mayHold(maphash.String(seed, fmt.Sprint("in", i))), "key %d", i)
	}
	maybe := 0
	for i := range n {
		if f.mayHold(maphash.String(seed, fmt.Sprint("out", i))) {
			maybe++
		}
	}
	t.Logf("%.2f B a key, %.2f%% false maybes", float64(f.bytes())/n, 100*float64(maybe)/n)
	require.Less(t, maybe, n*2/100)
	require.LessOrEqual(t, f.bytes(), n*5/4+64)
}

// TestFilterSparse: a filter far from full almost never says "maybe" for a
// key it does not hold: its false maybes come from its filling, not from
// keys that set the same bits (see bloom.probe). 4096 keys in a filter
// made for 65536 set about 22 of a block's 512 bits: (22/512)^7, about
// 3e-10, a key. Probes that drew on 17 bits of the hash gave 5 in 100,000.
func TestFilterSparse(t *testing.T) {
	const n, queries = 4096, 200_000
	b := newBloom(1 << 16)
	seed := maphash.MakeSeed()
	for i := range n {
		b.add(maphash.String(seed, fmt.Sprint("k", i)))
	}
	maybe := 0
	for i := n; i < n+queries; i++ {
		if b.has(maphash.String(seed, fmt.Sprint("k", i))) {
			maybe++
		}
	}
	require.LessOrEqual(t, maybe, 1, "false maybes in %d queries", queries)
}

// TestFilterKnowsStored: keys stored before Open (filled from the store
// into a filter too small for them, then rebuilt) and since (added as
// they are first used, through several rebuilds) are read from the store
// once out of memory; keys never stored are not read, but for the
// filter's false maybes.
func TestFilterKnowsStored(t *testing.T) {
	defer func(n int) { filterStart = n }(filterStart)
	filterStart = 64
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "db")
	g := strategies.GCRA{Rate: 1, Burst: 5}
	open := func() (*DB, *Limiter) {
		db, err := Open(path, Options{Durability: Async, MaxCachedKeys: 256, Now: fakeclock.New(time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)).Now})
		require.NoError(t, err)
		db.WaitFilter()
		l, err := db.Limiter("f", g)
		require.NoError(t, err)
		return db, l
	}
	db, l := open()
	for i := range 2000 {
		_, err := l.Allow(ctx, fmt.Sprint("before", i))
		require.NoError(t, err)
	}
	require.NoError(t, db.Close())

	db, l = open()
	defer db.Close()
	for i := range 2000 {
		_, err := l.Allow(ctx, fmt.Sprint("since", i))
		require.NoError(t, err)
	}
	falseMaybes := db.Stats().Loads
	require.Less(t, falseMaybes, uint64(2000*5/100), "new keys are not read")
	require.NoError(t, db.Flush(ctx))
	for _, kind := range []string{"before", "since"} {
		for i := range 2000 {
			r, err := l.Allow(ctx, fmt.Sprint(kind, i))
			require.NoError(t, err)
			require.EqualValues(t, 3, r.Remaining, "%s%d: its stored state", kind, i)
		}
	}
}

// bytes is the memory the filter takes.
func (f *stored) bytes() int {
	n := len(f.cur.Load().blocks) * 64
	if next := f.next.Load(); next != nil {
		n += len(next.blocks) * 64
	}
	return n
}
