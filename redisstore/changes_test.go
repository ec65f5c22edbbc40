package redisstore_test

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
)

// TestChangesGapAfterTrim: a reader whose messages were trimmed from the
// feed (as XADD's MAXLEN trims it) gets ErrGap, whether some messages are
// kept or none; one that read all it needs does not.
func TestChangesGapAfterTrim(t *testing.T) {
	srv := redistest.Start(t)
	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	opt, err := redis.ParseURL(srv.URL())
	require.NoError(t, err)
	rc := redis.NewClient(opt)
	defer rc.Close()
	announce := func(msg string) {
		require.NoError(t, db.Update(ctx, nil, func(b *redisstore.Batch) error { return b.Announce("t", []byte(msg)) }))
	}
	_, start, err := db.Changes(ctx, "t", "", 1)
	require.NoError(t, err)
	announce("a")
	announce("b")
	_, afterA, err := db.Changes(ctx, "t", start, 1)
	require.NoError(t, err)
	announce("c")
	require.NoError(t, rc.XTrimMaxLen(ctx, redisstore.DefaultPrefix+"{t}/f", 1).Err())
	_, _, err = db.Changes(ctx, "t", start, 10)
	require.ErrorIs(t, err, ratestore.ErrGap, "a and b were trimmed")
	_, _, err = db.Changes(ctx, "t", afterA, 10)
	require.ErrorIs(t, err, ratestore.ErrGap, "b was trimmed")
	msgs, last, err := db.Changes(ctx, "t", "", 10)
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.NoError(t, rc.XTrimMaxLen(ctx, redisstore.DefaultPrefix+"{t}/f", 0).Err())
	msgs, _, err = db.Changes(ctx, "t", last, 10)
	require.NoError(t, err, "nothing after the last message, trimmed or not")
	require.Empty(t, msgs)
	_, _, err = db.Changes(ctx, "t", afterA, 10)
	require.ErrorIs(t, err, ratestore.ErrGap, "every message trimmed")
}
