package migrate

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copyLimiters are limiters of every strategy, as the Copy tests use them.
var copyLimiters = map[string]strategies.Strategy{
	"tb":   strategies.TokenBucket{Rate: 2, Burst: 10},
	"gcra": strategies.GCRA{Rate: 1, Burst: 5},
	"lb":   strategies.LeakyBucket{Rate: 0.5, Capacity: 8},
	"fw": strategies.FixedWindow{Quotas: []strategies.Quota{
		{Name: "minute", Limit: 6, Window: time.Minute}, {Name: "hour", Limit: 20, Window: time.Hour}}},
	"sw": strategies.SlidingWindow{Limit: 7, Window: time.Minute},
	"rw": strategies.RollingWindow{Limit: 9, Window: 10 * time.Minute, Bucket: time.Minute},
	"cmp": strategies.Composite{Primary: strategies.GCRA{Rate: 5, Burst: 3},
		Secondary: strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "day", Limit: 12, Window: 24 * time.Hour}}}},
}

var copyKeys = []string{"alice", "bob", "k\x00\xff binary"}

// limiters returns db's limiter of each of copyLimiters.
func limiters(t *testing.T, db *ratestore.DB) map[string]*ratestore.Limiter {
	t.Helper()
	m := map[string]*ratestore.Limiter{}
	for name, s := range copyLimiters {
		l, err := db.Limiter(name, s)
		require.NoError(t, err)
		m[name] = l
	}
	return m
}

// TestCopy: bolt to badger and badger to bolt, a database with limiter
// states of every strategy, created keys, imported keys migrated, touched
// and still pending. The copy holds the same records, authenticates the
// same secrets with the same usage, has the same keys pending, and its
// limiters decide as the original's.
func TestCopy(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backendtest.Backend) {
		clk := fakeclock.New(importNow)
		src := openDB(t, b, clk)
		ls := limiters(t, src)
		for i, key := range copyKeys {
			for name, l := range ls {
				_, err := l.AllowN(ctx, key, int64(i+1))
				require.NoError(t, err, name)
			}
			clk.Advance(7 * time.Second)
		}
		_, err := ls["rw"].Record(ctx, "alice", 20) // past its limit
		require.NoError(t, err)

		importFixtures(t, src)
		secrets := []string{}
		for _, s := range fixtureSecrets {
			secrets = append(secrets, s)
		}
		for i := range 3 {
			_, s, err := keys(t, src).Create(ctx, keystore.Spec{Name: fmt.Sprintf("created-%d", i), TokenLimit: 1000})
			require.NoError(t, err)
			secrets = append(secrets, s)
		}
		_, err = keys(t, src).RecordUsage(ctx, keyID(t, src, secrets[len(secrets)-1]), 300)
		require.NoError(t, err)
		_, _, err = keys(t, src).Check(ctx, fixtureSecrets["research-team"]) // migrated; the others pending
		require.NoError(t, err)
		_, err = keys(t, src).RecordUsage(ctx, keyID(t, src, fixtureSecrets["staging"]), 1) // migrated by the change
		require.NoError(t, err)
		pending, err := Pending(ctx, src)
		require.NoError(t, err)
		require.Equal(t, 3, pending)
		want := dump(t, src)

		dst := openDB(t, otherEngine(b), clk)
		var progress []int
		rep, err := Copy(ctx, dst, src, func(n int) { progress = append(progress, n) })
		require.NoError(t, err)
		var bytes int64
		for _, r := range want {
			bytes += int64(len(r.Key) + len(r.Value))
		}
		assert.Equal(t, CopyReport{Records: len(want), Bytes: bytes}, rep)
		assert.Equal(t, []int{len(want)}, progress)
		assert.Equal(t, want, dump(t, dst))
		assert.Equal(t, want, dump(t, src), "the source is unchanged")

		dpending, err := Pending(ctx, dst)
		require.NoError(t, err)
		assert.Equal(t, pending, dpending)

		clk.Advance(90 * time.Second)
		for _, s := range secrets {
			sk, sres, serr := keys(t, src).Check(ctx, s)
			dk, dres, derr := keys(t, dst).Check(ctx, s)
			require.NoError(t, serr)
			require.NoError(t, derr)
			assert.Equal(t, sk, dk)
			assert.Equal(t, sres, dres)
			su, err := keys(t, src).Usage(ctx, sk.ID)
			require.NoError(t, err)
			du, err := keys(t, dst).Usage(ctx, dk.ID)
			require.NoError(t, err)
			assert.Equal(t, su, du)
		}
		dls := limiters(t, dst)
		for step := range 4 {
			for _, key := range copyKeys {
				for name := range copyLimiters {
					sr, err := ls[name].Peek(ctx, key)
					require.NoError(t, err)
					dr, err := dls[name].Peek(ctx, key)
					require.NoError(t, err)
					assert.Equal(t, sr, dr, "%s %q peek", name, key)
					sr, err = ls[name].AllowN(ctx, key, int64(step+2))
					require.NoError(t, err)
					dr, err = dls[name].AllowN(ctx, key, int64(step+2))
					require.NoError(t, err)
					assert.Equal(t, sr, dr, "%s %q step %d", name, key, step)
				}
			}
			clk.Advance(13 * time.Second)
		}
	})
}

// TestCopyEmpty: an empty database copies as nothing.
func TestCopyEmpty(t *testing.T) {
	clk := fakeclock.New(importNow)
	rep, err := Copy(ctx, openDB(t, backendtest.BadgerSync, clk), openDB(t, backendtest.BoltSync, clk), nil)
	require.NoError(t, err)
	assert.Equal(t, CopyReport{}, rep)
}

// TestCopyRefusesNonEmpty: a destination that holds anything is refused,
// by path, and left as it was.
func TestCopyRefusesNonEmpty(t *testing.T) {
	clk := fakeclock.New(importNow)
	src := openDB(t, backendtest.BoltSync, clk)
	importFixtures(t, src)
	dst := openDB(t, backendtest.BadgerSync, clk)
	_, _, err := keys(t, dst).Create(ctx, keystore.Spec{Name: "x", TokenLimit: 1})
	require.NoError(t, err)
	before := dump(t, dst)
	_, err = Copy(ctx, dst, src, nil)
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	assert.Contains(t, err.Error(), "the destination "+dst.Path()+" already holds records")
	assert.Equal(t, before, dump(t, dst))

	_, err = Copy(ctx, src, src, nil)
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	_, err = Copy(ctx, nil, src, nil)
	require.ErrorIs(t, err, ratestore.ErrInvalid)
}

// TestCopyBatches: many records go over in batches of at most 1000
// records, closed once they reach 256 KiB; badger takes every batch as it
// is, of small records, of records just under its value threshold (which
// count in full in its transaction size) and of large ones.
func TestCopyBatches(t *testing.T) {
	for _, shape := range []struct{ n, key, value int }{
		{n: 2500, key: 12, value: 30},
		{n: 1000, key: 12, value: 250},   // 262 bytes: 1000 records reach 256 KiB
		{n: 600, key: 1100, value: 1023}, // keys past 1 KiB, values under the threshold
		{n: 30, key: 10, value: 200_000}, // two values reach 256 KiB
		{n: 5, key: 10, value: 1 << 20},  // one value alone is past it
	} {
		t.Run(fmt.Sprintf("%dx%d+%d", shape.n, shape.key, shape.value), func(t *testing.T) {
			clk := fakeclock.New(importNow)
			src := openDB(t, backendtest.BoltSync, clk)
			recs := make([]ratestore.Entry, shape.n)
			for i := range recs {
				k := fmt.Sprintf("z/%08d", i)
				recs[i] = ratestore.Entry{Key: []byte(k + strings.Repeat("k", shape.key-len(k))),
					Value: []byte(strings.Repeat("v", shape.value))}
			}
			for i := 0; i < len(recs); i += 100 {
				require.NoError(t, src.Restore(ctx, recs[i:min(len(recs), i+100)]))
			}
			dst := openDB(t, backendtest.BadgerSync, clk)
			size := shape.key + shape.value
			perBatch := min(copyBatchRecords, (copyBatchBytes+size-1)/size)
			var sizes []int
			b := batcher{flush: func(batch []ratestore.Entry) error {
				sizes = append(sizes, len(batch))
				return dst.Restore(ctx, batch) // as it is: never split
			}}
			require.NoError(t, b.run(ctx, src))
			for i, n := range sizes {
				if i < len(sizes)-1 {
					require.Equal(t, perBatch, n)
				} else {
					require.Equal(t, shape.n-perBatch*i, n)
				}
			}
			require.NoError(t, verify(ctx, dst, src))
		})
	}
}

// TestRestoreSplits: a batch badger refuses (ErrTooBig) is split until it
// fits.
func TestRestoreSplits(t *testing.T) {
	const n = 20_000
	recs := make([]ratestore.Entry, n)
	for i := range recs {
		recs[i] = ratestore.Entry{Key: fmt.Appendf(nil, "z/%08d", i), Value: []byte("value")}
	}
	clk := fakeclock.New(importNow)
	db := openDB(t, backendtest.BadgerSync, clk)
	require.ErrorIs(t, db.Restore(ctx, recs), ErrTooBig)
	assert.Empty(t, dump(t, db))
	require.NoError(t, restore(ctx, db, recs))
	assert.Equal(t, recs, dump(t, db))
}

// TestVerify: the first difference between two databases, by key,
// hex-escaped.
func TestVerify(t *testing.T) {
	rec := func(k, v string) ratestore.Entry { return ratestore.Entry{Key: []byte(k), Value: []byte(v)} }
	base := []ratestore.Entry{rec("a/1", "x"), rec("h/\x00\x9f\"\\", "y"), rec("k/3", "z")}
	for _, tt := range []struct {
		name string
		dst  []ratestore.Entry
		want string // "" for none
	}{
		{"same", base, ""},
		{"value differs", []ratestore.Entry{base[0], rec("h/\x00\x9f\"\\", "Y!"), base[2]},
			`record 1, key "h/\x00\x9f\x22\x5c": values differ (1 bytes in the source, 2 in the copy)`},
		{"missing", []ratestore.Entry{base[0], base[2]}, `record 1, key "h/\x00\x9f\x22\x5c": in the source, missing from the copy`},
		{"extra", []ratestore.Entry{base[0], rec("b", "q"), base[1], base[2]}, `record 1, key "b": in the copy, not in the source`},
		{"extra at the end", append(base[:3:3], rec("z", "")), `record 3, key "z": in the copy, not in the source`},
		{"missing at the end", base[:2], `record 2, key "k/3": in the source, missing from the copy`},
		{"empty copy", nil, `record 0, key "a/1": in the source, missing from the copy`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := fakeclock.New(importNow)
			src, dst := openDB(t, backendtest.BoltSync, clk), openDB(t, backendtest.BadgerSync, clk)
			require.NoError(t, src.Restore(ctx, base))
			if len(tt.dst) > 0 {
				require.NoError(t, dst.Restore(ctx, tt.dst))
			}
			err := verify(ctx, dst, src)
			if tt.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrMismatch)
			assert.Equal(t, "migrate: the copy differs from its source: "+tt.want, err.Error())
		})
	}
}

func TestEscapeKey(t *testing.T) {
	assert.Equal(t, `"k/abc"`, escapeKey([]byte("k/abc")))
	assert.Equal(t, `"\x00\xff\x22\x5c\x7f\x0a"`, escapeKey([]byte("\x00\xff\"\\\x7f\n")))
	long := escapeKey([]byte(strings.Repeat("a", 300)))
	assert.Equal(t, `"`+strings.Repeat("a", 128)+`"... (300 bytes)`, long)
}
