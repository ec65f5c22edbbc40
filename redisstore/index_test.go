package redisstore_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
)

// target is a Redis to test on: one server, or a Cluster of three nodes.
type target struct {
	url   string
	nodes []string // the servers' addresses
}

// eachTarget runs test on one redis-server and on a 3-node Cluster.
func eachTarget(t *testing.T, test func(t *testing.T, tg target)) {
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		test(t, target{srv.URL(), []string{srv.Addr}})
	})
	t.Run("cluster", func(t *testing.T) {
		url := redistest.StartCluster(t, 3)
		o, err := redis.ParseClusterURL(url)
		require.NoError(t, err)
		test(t, target{url, o.Addrs})
	})
}

// raw is a client of the target's own, for what a test does behind the
// DB's back.
func (tg target) raw(t *testing.T) redis.UniversalClient {
	var c redis.UniversalClient = redis.NewClient(&redis.Options{Addr: tg.nodes[0]})
	if len(tg.nodes) > 1 {
		c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: tg.nodes})
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// commandCalls returns the calls of command (lower case) every node has
// counted since its last CONFIG RESETSTAT (INFO commandstats).
func (tg target) commandCalls(t *testing.T, command string) int {
	n := 0
	for _, addr := range tg.nodes {
		c := redis.NewClient(&redis.Options{Addr: addr})
		info, err := c.Info(ctx, "commandstats").Result()
		c.Close()
		require.NoError(t, err)
		_, rest, ok := strings.Cut(info, "cmdstat_"+command+":calls=")
		if !ok {
			continue
		}
		calls, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		require.NoError(t, err)
		n += calls
	}
	return n
}

// resetStats zeroes the command counts of every node.
func (tg target) resetStats(t *testing.T) {
	for _, addr := range tg.nodes {
		c := redis.NewClient(&redis.Options{Addr: addr})
		require.NoError(t, c.ConfigResetStat(ctx).Err())
		c.Close()
	}
}

// putAll stores the records kv in batches of 500.
func putAll(t *testing.T, db *redisstore.DB, kv map[string]string) {
	keys := slices.Sorted(maps.Keys(kv))
	for chunk := range slices.Chunk(keys, 500) {
		require.NoError(t, db.Update(ctx, nil, func(b backend.Batch) error {
			for _, k := range chunk {
				require.NoError(t, b.Put([]byte(k), []byte(kv[k])))
			}
			return nil
		}))
	}
}

// scanAll returns what Scan finds under prefix.
func scanAll(t *testing.T, db *redisstore.DB, prefix string) map[string]string {
	got := map[string]string{}
	var last string
	require.NoError(t, db.Scan(ctx, []byte(prefix), func(k, v []byte) error {
		require.Greater(t, string(k), last, "in key order")
		last = string(k)
		got[string(k)] = string(v)
		return nil
	}))
	return got
}

// TestScanReadsTheIndex: once a DB is open, Scan, ScanFrom and
// RereadPrefix send no SCAN (INFO commandstats of every node), under a
// prefix with a "/" or without, and find every record in key order.
func TestScanReadsTheIndex(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		db := open(t, tg.url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
		want := map[string]string{"top": "no slash", "k.x/1": "another segment"}
		for i := range 700 {
			want[fmt.Sprintf("k/id%04d", i)] = strconv.Itoa(i)
		}
		putAll(t, db, want)
		tg.resetStats(t)

		require.Equal(t, want, scanAll(t, db, ""))
		require.Len(t, scanAll(t, db, "k/"), 700)
		require.Equal(t, map[string]string{"k.x/1": "another segment"}, scanAll(t, db, "k."))
		n := 0
		require.NoError(t, db.ScanFrom(ctx, []byte("k/"), []byte("k/id0500"), func(k, v []byte) error { n++; return nil }))
		require.Equal(t, 200, n)
		n = 0
		require.NoError(t, db.RereadPrefix(ctx, []byte("k/id06"), func(k, v []byte) error { n++; return nil }))
		require.Equal(t, 100, n)
		require.Zero(t, tg.commandCalls(t, "scan"), "no SCAN after Open")
		require.NotZero(t, tg.commandCalls(t, "evalsha")+tg.commandCalls(t, "eval"), "the counts are counted")
	})
}

// TestScanSkipsMissingRecords: a record deleted is not scanned, nor is one
// whose commit failed (on a Cluster its key was added to the index before
// the commit), nor an index entry with no record at all; the entries of
// records that do not exist are dropped, on one Redis at once and on a
// Cluster once they are older than the grace of a commit in flight.
func TestScanSkipsMissingRecords(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		a := open(t, tg.url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
		b := open(t, tg.url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
		raw := tg.raw(t)
		putAll(t, a, map[string]string{"d/kept": "1", "d/deleted": "2"})
		require.NoError(t, a.Update(ctx, nil, func(bt backend.Batch) error { return bt.Delete([]byte("d/deleted")) }))

		err := a.Update(ctx, nil, func(bt backend.Batch) error {
			if _, err := bt.Get([]byte("c/z")); err != nil {
				return err
			}
			putAll(t, b, map[string]string{"c/z": "changed meanwhile"}) // another process
			if err := bt.Put([]byte("c/z"), []byte("mine")); err != nil {
				return err
			}
			return bt.Put([]byte("d/z"), []byte("never stored")) // same slot as c/z: one commit
		})
		require.ErrorIs(t, err, redisstore.ErrConflict)
		require.NoError(t, raw.ZAdd(ctx, "ratestore:{d}/i/d/", redis.Z{Member: "d/ghost"}).Err())

		require.Equal(t, map[string]string{"d/kept": "1"}, scanAll(t, a, "d/"))
		entries := func() []string { return raw.ZRange(ctx, "ratestore:{d}/i/d/", 0, -1).Val() }
		if len(tg.nodes) == 1 {
			require.Equal(t, []string{"d/kept"}, entries(), "dropped by the commit and by the scan")
			return
		}
		require.Equal(t, []string{"d/deleted", "d/kept", "d/z"}, entries(), "d/ghost, never added by a commit, is dropped")
		old := float64(time.Now().Add(-3 * time.Minute).UnixMilli())
		require.NoError(t, raw.ZAdd(ctx, "ratestore:{d}/a/d/", redis.Z{Member: "d/deleted", Score: old}, redis.Z{Member: "d/z", Score: old}).Err())
		require.Equal(t, map[string]string{"d/kept": "1"}, scanAll(t, a, "d/"))
		require.Equal(t, []string{"d/kept"}, entries(), "older than the grace: dropped")
	})
}

// TestMigrateLayout2: records of layout 2, stored with no index, are
// indexed by the Open that moves the Prefix to layout 3; several DBs may
// open at once. Records written after are indexed by their commits.
func TestMigrateLayout2(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		raw := tg.raw(t)
		want := map[string]string{"solo": "x", "L/e/20260118/w/1": "entry"}
		for i := range 1500 { // more than a page of SCAN and of Scan
			want[fmt.Sprintf("k/key_%d", i)] = strconv.Itoa(i)
		}
		for k, v := range want { // as layout 2 stored them: P{tag}/r/key
			tag := k[strings.LastIndexByte(k, '/')+1:]
			require.NoError(t, raw.Set(ctx, "ratestore:{"+tag+"}/r/"+k, v, 0).Err())
		}
		require.NoError(t, raw.Set(ctx, "ratestore:layout", "2", 0).Err())

		dbs := make([]*redisstore.DB, 4)
		var wg sync.WaitGroup
		errs := make([]error, len(dbs))
		for i := range dbs {
			wg.Go(func() {
				dbs[i], errs[i] = redisstore.Open(ctx, tg.url, redisstore.Options{Timeout: 5 * time.Second})
			})
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...))
		for _, db := range dbs {
			t.Cleanup(func() { db.Close() })
		}
		require.Equal(t, "3", raw.Get(ctx, "ratestore:layout").Val())
		tg.resetStats(t)
		for _, db := range dbs {
			require.Equal(t, want, scanAll(t, db, ""))
		}
		putAll(t, dbs[0], map[string]string{"k/key_new": "new"})
		require.Len(t, scanAll(t, dbs[3], "k/"), 1501)
		require.Zero(t, tg.commandCalls(t, "scan"))

		require.NoError(t, raw.Set(ctx, "ratestore:layout", "4", 0).Err())
		_, err := redisstore.Open(ctx, tg.url, redisstore.Options{})
		require.ErrorContains(t, err, "layout 4", "a later version's layout is left alone")
	})
}

// TestScanWhileWriting: writers on two DBs put and delete records, each
// key by one writer, while scanners on both scan: every scan finds every
// record whose put was acknowledged before it began and that no writer
// touched while it ran, and none whose delete was.
func TestScanWhileWriting(t *testing.T) {
	eachTarget(t, func(t *testing.T, tg target) {
		dbs := []*redisstore.DB{
			open(t, tg.url, newClock(), redisstore.Options{Timeout: 10 * time.Second}),
			open(t, tg.url, newClock(), redisstore.Options{Timeout: 10 * time.Second}),
		}
		const writers, keys, rounds = 4, 40, 6
		var ks keyStates
		ks.init(writers * keys)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for r := range rounds {
					for i := range keys {
						k := w*keys + i
						if err := ks.write(dbs[(w+r)%2], k, r%2 == 0 || i%3 != 0); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		written := make(chan struct{})
		go func() { wg.Wait(); close(written) }()
		scans := 0
		for done := false; !done; {
			select {
			case <-written:
				done = scans > 3 // and one more scan, after the last write
			default:
			}
			before := ks.snapshot()
			got := scanAll(t, dbs[scans%2], "w/")
			after := ks.snapshot()
			for k := range before {
				if before[k].stable(after[k]) && before[k].present != (got[key(k)] != "") {
					t.Fatalf("scan %d: %s: present %v, scanned %q", scans, key(k), before[k].present, got[key(k)])
				}
			}
			scans++
		}
		require.Equal(t, writers*keys*rounds, ks.finished(), "every write acknowledged")
		t.Logf("%d scans", scans)
	})
}

func key(i int) string { return fmt.Sprintf("w/%04d", i) }

// keyStates are what the writers of TestScanWhileWriting did to each key.
type keyStates struct {
	mu    sync.Mutex
	keys  []keyState
	total int
}

type keyState struct {
	started, ended int  // writes begun and acknowledged
	present        bool // the last write acknowledged was a put
}

// stable reports whether no write of the key was in flight at s, nor
// began before s2.
func (s keyState) stable(s2 keyState) bool {
	return s.started == s.ended && s2.started == s.started
}

func (ks *keyStates) init(n int) { ks.keys = make([]keyState, n) }

func (ks *keyStates) write(db *redisstore.DB, k int, put bool) error {
	ks.mu.Lock()
	ks.keys[k].started++
	ks.mu.Unlock()
	err := db.Update(ctx, nil, func(b backend.Batch) error {
		if put {
			return b.Put([]byte(key(k)), []byte("v"))
		}
		return b.Delete([]byte(key(k)))
	})
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if err == nil {
		ks.keys[k].ended++
		ks.keys[k].present = put
		ks.total++
	}
	return err
}

func (ks *keyStates) snapshot() []keyState {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return slices.Clone(ks.keys)
}

func (ks *keyStates) finished() int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.total
}

// TestBlindPutOfAListedRecord: on a Cluster, a record put blind that this
// DB has stored before (the ledger's chunks and marks) costs one round
// trip, its commit, which checks that the record still exists instead of
// adding its key to the index. When another process has deleted it
// meanwhile, and a scan dropped its key, the commit adds the key and
// stores the record: it is listed, and the batch's locks are released.
func TestBlindPutOfAListedRecord(t *testing.T) {
	url := redistest.StartCluster(t, 3)
	o, err := redis.ParseClusterURL(url)
	require.NoError(t, err)
	tg := target{url, o.Addrs}
	a := open(t, url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
	b := open(t, url, newClock(), redisstore.Options{Timeout: 5 * time.Second})
	raw := tg.raw(t)
	trips := redistest.CountTrips(a.Client())
	put := func(v string) error {
		return a.Update(ctx, []string{"d1"}, func(bt backend.Batch) error {
			if _, err := bt.Get([]byte("L/x/d1")); err != nil { // takes the lock
				return err
			}
			return bt.Put([]byte("L/w/d1"), []byte(v))
		})
	}
	require.NoError(t, put("1"))
	n := trips()
	require.NoError(t, put("2"))
	require.EqualValues(t, 2, trips()-n, "the read with the lock, and the commit")

	require.NoError(t, b.Update(ctx, nil, func(bt backend.Batch) error { return bt.Delete([]byte("L/w/d1")) }))
	old := float64(time.Now().Add(-3 * time.Minute).UnixMilli())
	require.NoError(t, raw.ZAdd(ctx, "ratestore:{L}/a/L/", redis.Z{Member: "L/w/d1", Score: old}).Err())
	require.Empty(t, scanAll(t, b, "L/"))
	require.Empty(t, raw.ZRange(ctx, "ratestore:{L}/i/L/", 0, -1).Val(), "the scan dropped the key")

	require.NoError(t, put("3"))
	require.Equal(t, map[string]string{"L/w/d1": "3"}, scanAll(t, b, "L/"))
	require.Zero(t, raw.Exists(ctx, "ratestore:{d1}/l/d1").Val(), "the lock is released")
}
