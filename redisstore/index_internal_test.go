package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/redistest"
)

// TestPruneSparesACommitInFlight plays, step by step on a Cluster, a scan
// that meets the index entry of a record whose commit is in flight: the
// commit added the key, the scan read it and found no record, the commit
// stored the record, and only then does the scan drop what it found
// missing. The entry stays: it was added within the grace. An entry added
// longer ago, whose record is missing, is dropped.
func TestPruneSparesACommitInFlight(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, redistest.StartCluster(t, 3), Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer db.Close()
	grace := indexGrace.Milliseconds()
	for _, k := range []string{"d/late", "d/old"} { // the commits' first step
		c := scriptCall{[]string{db.indexKey("d/"), db.addsKey("d/")}, []any{grace, k}}
		require.NoError(t, db.runScripts(ctx, indexAddScript, []scriptCall{c})[0].Err())
	}
	old := float64(time.Now().Add(-2 * indexGrace).UnixMilli())
	require.NoError(t, db.client.ZAdd(ctx, db.addsKey("d/"), redis.Z{Member: "d/old", Score: old}).Err())

	cur := &cursor{seg: "d/", lo: "[d/", hi: "(d0"}
	page, err := db.take(ctx, []*cursor{cur}, 10) // the scan reads the index
	require.NoError(t, err)
	require.Len(t, page, 2)
	vals, err := db.mget(ctx, []string{db.recordKey([]byte("d/late")), db.recordKey([]byte("d/old"))})
	require.NoError(t, err)
	require.Equal(t, []string{"", ""}, vals, "no record yet")
	require.NoError(t, db.client.Set(ctx, db.recordKey([]byte("d/late")), "stored", 0).Err()) // the commit's script
	db.prune(ctx, page)

	require.Equal(t, []string{"d/late"}, db.client.ZRange(ctx, db.indexKey("d/"), 0, -1).Val())
	var got []string
	require.NoError(t, db.Scan(ctx, []byte("d/"), func(k, v []byte) error { got = append(got, string(k)+"="+string(v)); return nil }))
	require.Equal(t, []string{"d/late=stored"}, got)
}

// TestCommitAfterDeadline: a commit script that runs after its deadline,
// more than half the grace after its keys were added to the index, stores
// nothing, and the batch fails with ErrConflict, to be run again.
func TestCommitAfterDeadline(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, redistest.Start(t).URL(), Options{})
	require.NoError(t, err)
	defer db.Close()
	b := &batch{db: db, ctx: ctx, vals: map[string]string{}, read: map[string]string{}}
	require.NoError(t, b.Put([]byte("d/x"), []byte("1")))
	calls := b.commitCalls(nil, time.Now().Add(-time.Second).UnixMilli(), b.indexOps())
	stored, conflicts, _, err := tally(db.runScripts(ctx, commitScript, calls))
	require.NoError(t, err)
	require.Equal(t, [2]int{0, 1}, [2]int{stored, conflicts})
	require.ErrorIs(t, commitError(nil, conflicts, stored), ratestore.ErrConflict)
	v, err := db.Get(ctx, []byte("d/x"))
	require.NoError(t, err)
	require.Nil(t, v)

	calls = b.commitCalls(nil, time.Now().Add(time.Minute).UnixMilli(), b.indexOps())
	stored, _, _, err = tally(db.runScripts(ctx, commitScript, calls))
	require.NoError(t, err)
	require.Equal(t, 1, stored, "before its deadline")
}
