package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

var ctx = context.Background()

func newClock() *fakeclock.Clock { return fakeclock.New(time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)) }

// open opens a DB on the Redis at url with clock.
func open(t *testing.T, url string, clock *fakeclock.Clock, opts redisstore.Options) *redisstore.DB {
	t.Helper()
	if clock != nil {
		opts.Now = clock.Now
	}
	db, err := redisstore.Open(ctx, url, opts)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

// testSeed is the seed of a random test: RATESTORE_SEED's, to replay a
// failure, else a new one, logged.
func testSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v, err := strconv.ParseUint(os.Getenv("RATESTORE_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (RATESTORE_SEED replays it)", seed)
	return seed
}

// randomStrategy is a configuration of a strategy of every kind in turn
// (i modulo the kinds), its numbers drawn from r: small limits, so that
// calls are denied often, and windows of seconds to minutes.
func randomStrategy(r *rand.Rand, i int) strategies.Strategy {
	rate := func() float64 { return float64(1+r.IntN(50)) / float64(1+r.IntN(8)) }
	limit := func() int64 { return 1 + r.Int64N(12) }
	window := func() time.Duration { return time.Duration(1+r.IntN(90)) * time.Second }
	switch i % 8 {
	case 0:
		return strategies.GCRA{Rate: rate(), Burst: limit()}
	case 1:
		return strategies.TokenBucket{Rate: rate(), Burst: limit()}
	case 2:
		return strategies.LeakyBucket{Rate: rate(), Capacity: limit()}
	case 3:
		return strategies.FixedWindow{Quotas: []strategies.Quota{
			{Name: "short", Limit: limit(), Window: window()},
			{Name: "long", Limit: 3 * limit(), Window: 10 * window()},
		}}
	case 4:
		return strategies.SlidingWindow{Limit: limit(), Window: window()}
	case 5:
		return strategies.RollingWindow{Limit: limit(), Window: time.Minute, Bucket: time.Duration(1+r.IntN(4)) * 5 * time.Second}
	case 6:
		return strategies.SlidingLog{Limit: limit(), Window: window()}
	default:
		return strategies.Composite{Primary: strategies.GCRA{Rate: rate(), Burst: limit()},
			Secondary: strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "q", Limit: 2 * limit(), Window: window()}}}}
	}
}

// TestSameResultsAsTheEngine drives a ratestore.DB and two redisstore.DBs
// on one redis-server (two instances of a program) with the same random
// calls at the same instants, every strategy in several random
// configurations: each call, made on one of the two Redis DBs at random,
// must answer exactly what the ratestore.DB answers. The two DBs share
// every key, so each finds keys the other changed since it last saw them.
func TestSameResultsAsTheEngine(t *testing.T) {
	srv := redistest.Start(t)
	clock := newClock()
	a := open(t, srv.URL(), clock, redisstore.Options{})
	b := open(t, srv.URL(), clock, redisstore.Options{})
	engine, err := ratestore.Open(filepath.Join(t.TempDir(), "db"), ratestore.Options{Durability: ratestore.Async, Now: clock.Now})
	require.NoError(t, err)
	defer engine.Close()

	const configs, steps = 24, 400
	r := rand.New(rand.NewPCG(testSeed(t), 1))
	keys := []string{"alice", "bob", "carol{x}"}
	for i := range configs {
		s := randomStrategy(r, i)
		name := fmt.Sprintf("l%d", i)
		want, err := engine.Limiter(name, s)
		require.NoError(t, err)
		la, err := a.Limiter(name, s)
		require.NoError(t, err)
		lb, err := b.Limiter(name, s)
		require.NoError(t, err)
		for step := range steps {
			switch x := r.IntN(20); {
			case x < 12:
				clock.Advance(time.Duration(r.Int64N(int64(500 * time.Millisecond))))
			case x < 13:
				clock.Advance(time.Duration(r.Int64N(int64(3 * time.Minute))))
			}
			key := keys[r.IntN(len(keys))]
			got := la
			if r.IntN(2) == 1 {
				got = lb
			}
			n := r.Int64N(4)
			what := fmt.Sprintf("config %d (%#v), step %d, key %q, n %d", i, s, step, key, n)
			var res, wres ratestore.Result
			var err, werr error
			switch op := r.IntN(10); {
			case op < 6:
				what = "AllowN: " + what
				res, err = got.AllowN(ctx, key, n)
				wres, werr = want.AllowN(ctx, key, n)
			case op < 8:
				what = "PeekN: " + what
				res, err = got.PeekN(ctx, key, n)
				wres, werr = want.PeekN(ctx, key, n)
			case op < 9:
				what = "Record: " + what
				res, err = got.Record(ctx, key, n)
				wres, werr = want.Record(ctx, key, n)
			default:
				what = "Reset: " + what
				err, werr = got.Reset(ctx, key), want.Reset(ctx, key)
			}
			require.NoError(t, werr, what)
			require.NoError(t, err, what)
			require.Equal(t, wres, res, what)
		}
	}
}

// TestTwoInstancesExactlyLimit: 64 goroutines on two DBs (two processes)
// call one key of each strategy at one instant, many more times than the
// limit: exactly the limit is allowed, across both.
func TestTwoInstancesExactlyLimit(t *testing.T) {
	srv := redistest.Start(t)
	clock := newClock()
	dbs := []*redisstore.DB{open(t, srv.URL(), clock, redisstore.Options{Timeout: 10 * time.Second}),
		open(t, srv.URL(), clock, redisstore.Options{Timeout: 10 * time.Second})}
	const limit = 40
	for _, s := range []strategies.Strategy{
		strategies.GCRA{Rate: 1, Burst: limit},
		strategies.TokenBucket{Rate: 1, Burst: limit},
		strategies.LeakyBucket{Rate: 1, Capacity: limit},
		strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "m", Limit: limit, Window: time.Minute}}},
		strategies.SlidingWindow{Limit: limit, Window: time.Minute},
		strategies.RollingWindow{Limit: limit, Window: time.Minute, Bucket: time.Second},
		strategies.SlidingLog{Limit: limit, Window: time.Minute},
		strategies.Composite{Primary: strategies.GCRA{Rate: 1, Burst: limit},
			Secondary: strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "m", Limit: 1000, Window: time.Minute}}}},
	} {
		name := strings.ReplaceAll(fmt.Sprintf("%T", s), "strategies.", "")
		t.Run(name, func(t *testing.T) {
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for g := range 64 {
				l, err := dbs[g%2].Limiter(name, s)
				require.NoError(t, err)
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range 3 {
						r, err := l.Allow(ctx, "k")
						if err != nil {
							t.Error(err)
							return
						}
						if r.Allowed {
							allowed.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			require.EqualValues(t, limit, allowed.Load())
		})
	}
}

// TestClockBehind: an instance whose clock is behind the instant of a
// key's last change, by less than the strategy's longest wait, decides at
// that instant: the key neither refills nor waits longer for it.
func TestClockBehind(t *testing.T) {
	srv := redistest.Start(t)
	ahead, behind := newClock(), newClock()
	behind.Advance(-5 * time.Millisecond)
	a := open(t, srv.URL(), ahead, redisstore.Options{})
	b := open(t, srv.URL(), behind, redisstore.Options{})
	la, err := a.Limiter("g", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	lb, err := b.Limiter("g", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	r, err := la.Allow(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed)
	r, err = lb.Allow(ctx, "k")
	require.NoError(t, err)
	require.False(t, r.Allowed)
	require.Equal(t, time.Second, r.RetryAfter, "decided at a's instant, not 5ms before it")
}

// TestStoredWithTTL: a state is stored under the key's hash tag, with the
// instant and the versioned encoding, and a TTL of its ResetAfter plus a
// second; a state back at its initial value is deleted.
func TestStoredWithTTL(t *testing.T) {
	srv := redistest.Start(t)
	clock := newClock()
	db := open(t, srv.URL(), clock, redisstore.Options{Prefix: "rs:"})
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()

	l, err := db.Limiter("api", strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "m", Limit: 2, Window: time.Minute}}})
	require.NoError(t, err)
	r, err := l.Allow(ctx, "alice")
	require.NoError(t, err)
	require.True(t, r.Allowed)
	v, err := raw.Get(ctx, "rs:{alice}api").Result()
	require.NoError(t, err)
	at, enc, ok := strings.Cut(v, ";")
	require.True(t, ok, v)
	require.Equal(t, fmt.Sprint(clock.Now().UnixNano()), at)
	require.True(t, strings.HasPrefix(enc, "23|"), "the fixed window's versioned encoding: %s", enc)
	ttl, err := raw.PTTL(ctx, "rs:{alice}api").Result()
	require.NoError(t, err)
	require.InDelta(t, float64(r.ResetAfter+time.Second), float64(ttl), float64(100*time.Millisecond))

	g, err := db.Limiter("gcra", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	_, err = g.Allow(ctx, "bob")
	require.NoError(t, err)
	require.EqualValues(t, 1, raw.Exists(ctx, "rs:{bob}gcra").Val())
	clock.Advance(time.Second)
	_, err = g.Record(ctx, "bob", 0)
	require.NoError(t, err)
	require.NoError(t, g.Reset(ctx, "bob"))
	require.EqualValues(t, 0, raw.Exists(ctx, "rs:{bob}gcra").Val(), "Reset deletes the state")
}

// TestRedisRestarted: after Redis forgets the script (SCRIPT FLUSH, as a
// restart does) and drops every key (FLUSHALL), calls go on: the script is
// sent again, and states the DB remembers but Redis lost start afresh.
func TestRedisRestarted(t *testing.T) {
	srv := redistest.Start(t)
	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	l, err := db.Limiter("api", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	r, err := l.Allow(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed)
	require.NoError(t, raw.ScriptFlush(ctx).Err())
	require.NoError(t, raw.FlushAll(ctx).Err())
	r, err = l.Allow(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed, "Redis lost the state: the key starts afresh")
	r, err = l.Allow(ctx, "k")
	require.NoError(t, err)
	require.False(t, r.Allowed)
}

// TestTLS: a rediss:// URL speaks TLS, trusting the CA of Options.TLSConfig;
// without it, the server's certificate (from an unknown CA) is refused.
func TestTLS(t *testing.T) {
	srv, tlsConfig := redistest.StartTLS(t)
	require.True(t, strings.HasPrefix(srv.URL(), "rediss://"))
	db := open(t, srv.URL(), newClock(), redisstore.Options{TLSConfig: tlsConfig})
	l, err := db.Limiter("api", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	r, err := l.Allow(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed)

	_, err = redisstore.Open(ctx, srv.URL(), redisstore.Options{Timeout: time.Second})
	require.ErrorContains(t, err, "certificate")
	_, err = redisstore.Open(ctx, strings.Replace(srv.URL(), "rediss:", "redis:", 1), redisstore.Options{TLSConfig: tlsConfig})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
}

// TestCorruptValue: a value that is not a state is reported with
// ErrCorrupt, names the key, and is left as it is.
func TestCorruptValue(t *testing.T) {
	srv := redistest.Start(t)
	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	l, err := db.Limiter("api", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	for _, v := range []string{"garbage", "123;zz|x", ";"} {
		require.NoError(t, raw.Set(ctx, "ratestore:{k}api", v, 0).Err())
		_, err := l.Allow(ctx, "k")
		require.ErrorIs(t, err, ratestore.ErrCorrupt, v)
		require.Contains(t, err.Error(), `key "k"`)
		require.Equal(t, v, raw.Get(ctx, "ratestore:{k}api").Val(), "left as it was")
	}
}

// TestFailClosedAndOpen: with Redis gone, a call fails by default, with an
// error matching ErrUncertain when it asked for a write, and with FailOpen
// it is allowed and the failure logged.
func TestFailClosedAndOpen(t *testing.T) {
	srv := redistest.Start(t)
	var logged bytes.Buffer
	closed := open(t, srv.URL(), newClock(), redisstore.Options{Timeout: 200 * time.Millisecond})
	opened := open(t, srv.URL(), newClock(), redisstore.Options{Timeout: 200 * time.Millisecond, FailOpen: true,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	lc, err := closed.Limiter("api", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	lo, err := opened.Limiter("api", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	r, err := lc.Allow(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed)
	r, err = lo.Allow(ctx, "k")
	require.NoError(t, err)
	require.False(t, r.Allowed, "the same key, one instance after the other")

	srv.Stop()
	r, err = lc.Allow(ctx, "k2")
	require.Error(t, err)
	require.False(t, r.Allowed)
	require.ErrorIs(t, err, ratestore.ErrUncertain, "a write was asked for")
	_, err = lc.Allow(ctx, "k")
	require.Error(t, err)
	require.NotErrorIs(t, err, ratestore.ErrUncertain, "a denial writes nothing")
	_, err = lc.Peek(ctx, "k2")
	require.Error(t, err)
	require.NotErrorIs(t, err, ratestore.ErrUncertain, "a Peek writes nothing")

	r, err = lo.Allow(ctx, "k")
	require.NoError(t, err)
	require.True(t, r.Allowed, "FailOpen")
	require.Contains(t, logged.String(), "FailOpen")
	require.NotContains(t, logged.String(), `"k"`, "keys (API keys, perhaps) are not logged")
}

// TestTimeout: a Redis that does not answer in Options.Timeout fails the
// call in that time.
func TestTimeout(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	db := open(t, srv.URL(), newClock(), redisstore.Options{Timeout: 50 * time.Millisecond})
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	l, err := db.Limiter("api", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	_, err = l.Allow(ctx, "k")
	require.NoError(t, err)
	asleep := make(chan struct{})
	go func() {
		defer close(asleep)
		raw.Do(ctx, "DEBUG", "SLEEP", "2") // Redis answers nothing for 2 seconds
	}()
	// Redis is asleep once a probe of its own gets no answer in time.
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr, ReadTimeout: 20 * time.Millisecond, MaxRetries: -1})
	defer probe.Close()
	require.Eventually(t, func() bool { return probe.Ping(ctx).Err() != nil }, 10*time.Second, time.Millisecond)
	_, err = l.Allow(ctx, "k")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	select {
	case <-asleep:
		t.Fatal("the call failed only once Redis woke up: Options.Timeout did not bound it")
	default: // failed while Redis slept: by the timeout
	}
	<-asleep
}

// TestBadInput: bad options, names, keys and n are errors matching
// ErrInvalid that name what was wrong; after Close, ErrClosed.
func TestBadInput(t *testing.T) {
	srv := redistest.Start(t)
	_, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Prefix: "a{b"})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	_, err = redisstore.Open(ctx, "http://x", redisstore.Options{})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	_, err = redisstore.Open(ctx, "redis://user:s3cret@127.0.0.1:1/0", redisstore.Options{})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "s3cret", "the password is not in the error")

	db := open(t, srv.URL(), newClock(), redisstore.Options{})
	_, err = db.Limiter("bad name", strategies.GCRA{Rate: 1, Burst: 1})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	_, err = db.Limiter("ok", strategies.GCRA{Rate: -1, Burst: 1})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	l, err := db.Limiter("ok", strategies.GCRA{Rate: 1, Burst: 1})
	require.NoError(t, err)
	_, err = l.AllowN(ctx, "k", -1)
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	_, err = l.Allow(ctx, "")
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	require.NoError(t, db.Close())
	_, err = l.Allow(ctx, "k")
	require.True(t, errors.Is(err, redisstore.ErrClosed))
}

// TestCluster: on a Redis Cluster of three nodes, keys spread over the
// nodes, every state of one key lies in one slot (its hash tag), and two
// DBs share the keys exactly.
func TestCluster(t *testing.T) {
	url := redistest.StartCluster(t, 3)
	clock := newClock()
	a := open(t, url, clock, redisstore.Options{})
	b := open(t, url, clock, redisstore.Options{})
	la, err := a.Limiter("rpm", strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "m", Limit: 3, Window: time.Minute}}})
	require.NoError(t, err)
	lb, err := b.Limiter("rpm", strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "m", Limit: 3, Window: time.Minute}}})
	require.NoError(t, err)
	ga, err := a.Limiter("gcra", strategies.GCRA{Rate: 1, Burst: 2})
	require.NoError(t, err)
	for i := range 30 {
		key := fmt.Sprintf("key-%d", i)
		for j := range 4 {
			l := la
			if j%2 == 1 {
				l = lb
			}
			r, err := l.Allow(ctx, key)
			require.NoError(t, err)
			require.Equal(t, j < 3, r.Allowed, "key %s, call %d", key, j)
		}
		_, err := ga.Allow(ctx, key)
		require.NoError(t, err)
	}
	cc, err := redis.ParseClusterURL(url)
	require.NoError(t, err)
	raw := redis.NewClusterClient(cc)
	defer raw.Close()
	nodes := map[string]bool{}
	for i := range 30 {
		rpm, gcra := fmt.Sprintf("ratestore:{key-%d}rpm", i), fmt.Sprintf("ratestore:{key-%d}gcra", i)
		s1, err := raw.ClusterKeySlot(ctx, rpm).Result()
		require.NoError(t, err)
		s2, err := raw.ClusterKeySlot(ctx, gcra).Result()
		require.NoError(t, err)
		require.Equal(t, s1, s2, "one key's states share a slot")
		require.EqualValues(t, 1, raw.Exists(ctx, rpm).Val())
		nodes[fmt.Sprint(s1*3/16384)] = true
	}
	require.Len(t, nodes, 3, "the keys spread over the three nodes")
}

// TestRedisClock: one instance's clock runs 30 s ahead of another's, far
// past a GCRA's longest wait (5 s). On their own clocks, the key gains its
// whole burst each time the instances alternate on it, as the package doc
// says; on Redis's clock (Options.RedisClock) the two decide as one clock
// does, and the key allows its burst and no more. The calls take a few
// milliseconds of real time, in which the rate (1/s) adds nothing, or one
// more should a second pass.
func TestRedisClock(t *testing.T) {
	srv := redistest.Start(t)
	s := strategies.GCRA{Rate: 1, Burst: 5}
	aheadNow := func() time.Time { return time.Now().Add(30 * time.Second) }
	for _, redisClock := range []bool{false, true} {
		t.Run(fmt.Sprintf("RedisClock=%v", redisClock), func(t *testing.T) {
			var ls [2]*redisstore.Limiter
			for i, now := range []func() time.Time{aheadNow, time.Now} {
				db, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: now, RedisClock: redisClock})
				require.NoError(t, err)
				t.Cleanup(func() { db.Close() })
				if ls[i], err = db.Limiter("g", s); err != nil {
					t.Fatal(err)
				}
			}
			key := fmt.Sprint("k", redisClock)
			start := time.Now()
			allowed := 0
			for i := range 40 {
				r, err := ls[i%2].Allow(ctx, key)
				require.NoError(t, err)
				if r.Allowed {
					allowed++
				}
			}
			t.Logf("%d of 40 allowed", allowed)
			if !redisClock {
				require.Greater(t, allowed, 10, "a burst per alternation")
				return
			}
			bound := 5 + int(time.Since(start)/time.Second) + 1
			require.GreaterOrEqual(t, allowed, 5)
			require.LessOrEqual(t, allowed, bound)
		})
	}
}

// TestManyKeysExactlyLimit: 32 goroutines on two DBs call 200 keys each,
// in orders of their own, so that the swaps of many keys share pipelines
// and the calls on a key share batches: every key allows exactly its
// limit, across both.
func TestManyKeysExactlyLimit(t *testing.T) {
	srv := redistest.Start(t)
	clock := newClock()
	dbs := []*redisstore.DB{open(t, srv.URL(), clock, redisstore.Options{Timeout: 10 * time.Second}),
		open(t, srv.URL(), clock, redisstore.Options{Timeout: 10 * time.Second})}
	const keys, limit = 200, 5
	allowed := make([]atomic.Int64, keys)
	var wg sync.WaitGroup
	for g := range 32 {
		l, err := dbs[g%2].Limiter("g", strategies.GCRA{Rate: 1, Burst: limit})
		require.NoError(t, err)
		wg.Go(func() {
			for _, k := range rand.New(rand.NewPCG(uint64(g), 1)).Perm(keys) {
				r, err := l.Allow(ctx, strconv.Itoa(k))
				if err != nil {
					t.Error(err)
					return
				}
				if r.Allowed {
					allowed[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range allowed {
		require.EqualValues(t, limit, allowed[k].Load(), "key %d", k)
	}
}
