package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/redisstore"
)

// announce runs a batch that puts the record rec and announces msgs on
// topic.
func announce(db *redisstore.DB, topic, rec string, msgs ...string) error {
	return db.Update(ctx, nil, func(b backend.Batch) error {
		for _, m := range msgs {
			if err := b.Announce(topic, []byte(m)); err != nil {
				return err
			}
		}
		return b.Put([]byte(rec), []byte("x"))
	})
}

// TestChangesGap: a reader whose next messages were trimmed from the feed
// fails with ErrGap, one past them reads on; a feed lost (deleted) is a
// gap to every reader that had read from it.
func TestChangesGap(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		db := open(t, tg.url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
		raw := tg.raw(t)
		_, start, err := db.Changes(ctx, "topic", "", 10)
		require.NoError(t, err)
		require.Equal(t, "0-0", start, "no feed yet")
		pos := []string{start}
		for _, m := range []string{"a", "b", "c"} {
			require.NoError(t, announce(db, "topic", "r/"+m, m))
			msgs, next, err := db.Changes(ctx, "topic", pos[len(pos)-1], 10)
			require.NoError(t, err)
			require.Equal(t, [][]byte{[]byte(m)}, msgs)
			pos = append(pos, next)
		}
		require.NoError(t, raw.XTrimMaxLen(ctx, "ratestore:{topic}/f", 1).Err()) // drops a and b
		for i, p := range pos[:2] {
			_, _, err := db.Changes(ctx, "topic", p, 10)
			require.ErrorIs(t, err, ratestore.ErrGap, "after position %d", i)
		}
		msgs, _, err := db.Changes(ctx, "topic", pos[2], 10)
		require.NoError(t, err, "after b, which was read: nothing missed")
		require.Equal(t, [][]byte{[]byte("c")}, msgs)

		require.NoError(t, raw.Del(ctx, "ratestore:{topic}/f").Err())
		_, _, err = db.Changes(ctx, "topic", pos[3], 10)
		require.ErrorIs(t, err, ratestore.ErrGap, "the feed was lost")
		_, _, err = db.Changes(ctx, "topic", "01-0", 10)
		require.ErrorIs(t, err, ratestore.ErrInvalid)
	})
}

// TestAnnounceWithTheCommit: a batch's messages are in the feed exactly
// when its changes are stored: not for a batch that failed with
// ErrConflict, and for one whose fn failed after making changes, which
// are stored all the same.
func TestAnnounceWithTheCommit(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		a := open(t, tg.url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
		b := open(t, tg.url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
		_, pos, err := b.Changes(ctx, "topic", "", 10)
		require.NoError(t, err)
		err = a.Update(ctx, nil, func(bt backend.Batch) error {
			if _, err := bt.Get([]byte("r/x")); err != nil {
				return err
			}
			require.NoError(t, announce(b, "other", "r/x")) // another process changes r/x
			require.NoError(t, bt.Announce("topic", []byte("conflict")))
			return bt.Put([]byte("r/x"), []byte("mine"))
		})
		require.ErrorIs(t, err, redisstore.ErrConflict)
		fnErr := errors.New("fn failed")
		err = a.Update(ctx, nil, func(bt backend.Batch) error {
			require.NoError(t, bt.Announce("topic", []byte("stored")))
			require.NoError(t, bt.Put([]byte("r/y"), []byte("1")))
			return fnErr
		})
		require.ErrorIs(t, err, fnErr)
		msgs, _, err := b.Changes(ctx, "topic", pos, 10)
		require.NoError(t, err)
		require.Equal(t, [][]byte{[]byte("stored")}, msgs)
	})
}

// TestAnnounceFailedIsAGap: on a Cluster, where messages are added after
// the commit, a message that cannot be added makes a gap in its feed
// instead: at once when Redis takes it, else with the DB's next Changes.
// A reader behind it fails with ErrGap and reads everything again.
func TestAnnounceFailedIsAGap(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		if len(tg.nodes) == 1 {
			t.Skip("on one Redis the commit script adds the messages")
		}
		w := open(t, tg.url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
		r := open(t, tg.url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
		fail := &failKey{key: "ratestore:{topic}/f"}
		w.Client().AddHook(fail)
		for _, gapAtOnce := range []bool{true, false} {
			_, pos, err := r.Changes(ctx, "topic", "", 10)
			require.NoError(t, err)
			fail.left.Store(-1) // every command
			if gapAtOnce {
				fail.left.Store(1) // the announcement's alone
			}
			require.NoError(t, announce(w, "topic", "r/x", "lost"), "the batch is stored all the same")
			fail.left.Store(0)
			if !gapAtOnce {
				msgs, _, err := r.Changes(ctx, "topic", pos, 10)
				require.NoError(t, err)
				require.Empty(t, msgs, "the gap is owed")
				_, _, err = w.Changes(ctx, "other", "", 10)
				require.NoError(t, err)
			}
			_, _, err = r.Changes(ctx, "topic", pos, 10)
			require.ErrorIs(t, err, ratestore.ErrGap, "gap at once: %v", gapAtOnce)
		}
	})
}

// failKey is a go-redis hook failing the next left commands naming key
// (-1: all of them).
type failKey struct {
	key  string
	left atomic.Int64
}

func (f *failKey) fails(cmd redis.Cmder) bool {
	if f.left.Load() == 0 || !strings.Contains(fmt.Sprint(cmd.Args()...), f.key) {
		return false
	}
	if f.left.Load() > 0 {
		f.left.Add(-1)
	}
	return true
}

func (*failKey) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failKey) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if f.fails(cmd) {
			cmd.SetErr(errors.New("failKey: failed"))
			return cmd.Err()
		}
		return next(ctx, cmd)
	}
}

func (f *failKey) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if f.fails(c) {
				for _, c := range cmds {
					c.SetErr(errors.New("failKey: failed"))
				}
				return cmds[0].Err()
			}
		}
		return next(ctx, cmds)
	}
}
