package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// redisConns is how many connections, and goroutines, BenchmarkRedis
// drives: the target is stated at 64.
const redisConns = 64

// BenchmarkRedis is a GCRA decision on a key drawn from 10k, every call
// allowed (a million per second, a burst of a million), from redisConns
// goroutines over as many connections to one redis-server (Debian's, no
// persistence; started by the benchmark), in one run:
//
//   - redis_rate: go-redis/redis_rate's Limiter.Allow, its GCRA Lua script
//     run by EVALSHA on Redis's clock;
//   - redisstore: ratestore's redisstore.Limiter.Allow, the Go decision on
//     the key's last seen state and its compare-and-swap script by EVALSHA.
//
// decisions/s is over all goroutines; round-trips/op is the scripts Redis
// ran (INFO commandstats: EVALSHA and EVAL) per decision. The target is
// redisstore within 1.2x of redis_rate's time, one round trip a decision.
func BenchmarkRedis(b *testing.B) {
	keys := makeKeys(10_000)
	for _, impl := range []string{"redis_rate", "redisstore"} {
		b.Run("impl="+impl, func(b *testing.B) {
			srv := redistest.Start(b)
			ctx := context.Background()
			var allow func(key string) (bool, error)
			switch impl {
			case "redis_rate":
				client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: redisConns})
				defer client.Close()
				lim := redis_rate.NewLimiter(client)
				limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: 1e9}
				allow = func(key string) (bool, error) {
					r, err := lim.Allow(ctx, key, limit)
					return err == nil && r.Allowed > 0, err
				}
			default:
				db, err := redisstore.Open(ctx, srv.URL()+"?pool_size="+strconv.Itoa(redisConns), redisstore.Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				l, err := db.Limiter("gcra", strategies.GCRA{Rate: 1_000_000, Burst: 1_000_000})
				if err != nil {
					b.Fatal(err)
				}
				allow = func(key string) (bool, error) {
					r, err := l.Allow(ctx, key)
					return r.Allowed, err
				}
			}
			for _, k := range keys { // every key stored, and seen by redisstore: the steady state
				if _, err := allow(k); err != nil {
					b.Fatal(err)
				}
			}
			before := scripts(b, srv.Addr)
			var next, failed atomic.Int64
			b.SetParallelism(max(1, redisConns/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1)) * 7919
				for pb.Next() {
					i++
					if ok, err := allow(keys[i%len(keys)]); err != nil || !ok {
						failed.Add(1)
					}
				}
			})
			b.StopTimer()
			if failed.Load() > 0 {
				b.Fatalf("%d calls failed or were denied", failed.Load())
			}
			b.ReportMetric(float64(scripts(b, srv.Addr)-before)/float64(b.N), "round-trips/op")
			if s := b.Elapsed().Seconds(); s > 0 {
				b.ReportMetric(float64(b.N)/s, "decisions/s")
			}
		})
	}
}

// BenchmarkRedisInstances' instances, and goroutines (as many connections
// in each instance's pool) per instance.
const (
	redisInstances     = 4
	redisInstanceConns = 16
)

// BenchmarkRedisInstances is several instances of a program sharing limits
// on one redis-server (Debian's, no persistence; one started for each
// sub-benchmark, so that one side's keys do not touch the other's): 4
// instances in one process, each its own handle with its own pool of 16
// connections, and 16 goroutines on each (64 in all, whatever GOMAXPROCS),
// taking b.N decisions between them. Every call is a GCRA decision, allowed
// (a million per second, a burst of a million); a call that errors or is
// denied fails the benchmark.
//
//   - impl=redis_rate: per instance a go-redis client and its own
//     go-redis/redis_rate Limiter, whose GCRA Lua script runs by EVALSHA on
//     Redis's clock;
//   - impl=redisstore: per instance a redisstore.Open DB and its limiter,
//     deciding in Go on the key's last seen state and storing the outcome by
//     a compare-and-swap script (see the package doc for how it meets the
//     changes of the other instances).
//
// workload=hot is every call on one key, so each instance's cached state
// is mostly stale (the other three changed it); workload=10k draws each
// key uniformly from 10k (a generator per goroutine). Before the timer,
// every instance makes one call on every key: Redis holds every state and
// each instance has seen it, the steady state.
//
// decisions/s is b.N over the elapsed time, all goroutines together;
// scripts/op is the scripts Redis ran (INFO commandstats: EVALSHA and
// EVAL) per decision; round-trips/op is the round trips the clients made
// per decision, counted on the client side by a go-redis hook (a command
// or a pipeline is one). The target: redisstore's decisions/s at least
// redis_rate's (1.0×) on both workloads.
func BenchmarkRedisInstances(b *testing.B) {
	for _, w := range []struct {
		name string
		keys []string
	}{{"hot", []string{"hot"}}, {"10k", makeKeys(10_000)}} {
		b.Run("workload="+w.name, func(b *testing.B) {
			for _, impl := range []string{"redis_rate", "redisstore"} {
				b.Run("impl="+impl, func(b *testing.B) { benchRedisInstances(b, impl, w.keys) })
			}
		})
	}
}

// benchRedisInstances is one sub-benchmark of BenchmarkRedisInstances:
// impl's instances on a new redis-server, deciding on keys drawn from keys.
func benchRedisInstances(b *testing.B, impl string, keys []string) {
	srv := redistest.Start(b)
	insts := make([]redisInstance, redisInstances)
	for i := range insts {
		insts[i] = openRedisInstance(b, impl, srv)
	}
	ctx := context.Background()
	for _, inst := range insts {
		if err := inst.fillPool(ctx); err != nil {
			b.Fatal(err)
		}
	}
	err := runInstances(insts, func(g int, inst redisInstance) error { // warm-up
		for j := g / redisInstances; j < len(keys); j += redisInstanceConns {
			if _, err := inst.allow(ctx, keys[j]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	before, tripsBefore := scripts(b, srv.Addr), countTrips(insts)
	var remaining, failed atomic.Int64
	remaining.Store(int64(b.N))
	b.ResetTimer()
	err = runInstances(insts, func(g int, inst redisInstance) error {
		rng := rand.New(rand.NewPCG(uint64(g), 0x9e3779b97f4a7c15))
		var first error
		for remaining.Add(-1) >= 0 {
			key := keys[rng.IntN(len(keys))]
			ok, err := inst.allow(ctx, key)
			if err == nil && !ok {
				err = fmt.Errorf("key %q denied", key)
			}
			if err != nil {
				failed.Add(1)
				first = cmp.Or(first, err)
			}
		}
		return first
	})
	b.StopTimer()
	if err != nil {
		b.Fatalf("%d of %d calls failed or were denied; one: %v", failed.Load(), b.N, err)
	}
	b.ReportMetric(float64(countTrips(insts)-tripsBefore)/float64(b.N), "round-trips/op")
	b.ReportMetric(float64(scripts(b, srv.Addr)-before)/float64(b.N), "scripts/op")
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "decisions/s")
	}
}

// redisInstance is one instance of BenchmarkRedisInstances: its own client
// and limiter. allow decides a call on key; trips is how many round trips
// its client has made since it was opened.
type redisInstance struct {
	client *redis.Client
	allow  func(ctx context.Context, key string) (bool, error)
	trips  func() int64
}

// fillPool opens all of the instance's redisInstanceConns connections
// (each held by a Conn until all are, then handed back to the pool), so
// that the timed loop dials none: a new connection's handshake (HELLO,
// CLIENT SETINFO) would count as round trips.
func (inst redisInstance) fillPool(ctx context.Context) error {
	conns := make([]*redis.Conn, redisInstanceConns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		conns[i] = inst.client.Conn()
		if err := conns[i].Ping(ctx).Err(); err != nil {
			return err
		}
	}
	return nil
}

// openRedisInstance opens an instance of impl on srv, closed when b's run
// ends (before srv stops: cleanups run last registered first).
func openRedisInstance(b *testing.B, impl string, srv *redistest.Server) redisInstance {
	if impl == "redis_rate" {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: redisInstanceConns})
		b.Cleanup(func() { client.Close() })
		lim := redis_rate.NewLimiter(client)
		limit := redis_rate.Limit{Rate: 1_000_000, Burst: 1_000_000, Period: time.Second}
		return redisInstance{client: client, trips: redistest.CountTrips(client), allow: func(ctx context.Context, key string) (bool, error) {
			r, err := lim.Allow(ctx, key, limit)
			return err == nil && r.Allowed > 0, err
		}}
	}
	db, err := redisstore.Open(context.Background(), srv.URL()+"?pool_size="+strconv.Itoa(redisInstanceConns), redisstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	l, err := db.Limiter("gcra", strategies.GCRA{Rate: 1_000_000, Burst: 1_000_000})
	if err != nil {
		b.Fatal(err)
	}
	client, ok := db.Client().(*redis.Client)
	if !ok {
		b.Fatalf("redisstore's client is a %T, not one server's", db.Client())
	}
	return redisInstance{client: client, trips: redistest.CountTrips(client), allow: func(ctx context.Context, key string) (bool, error) {
		r, err := l.Allow(ctx, key)
		return r.Allowed, err
	}}
}

// runInstances runs fn on redisInstances*redisInstanceConns goroutines,
// goroutine g on instance g%redisInstances, waits for them all and
// returns the first error (in goroutine order) that fn returned.
func runInstances(insts []redisInstance, fn func(g int, inst redisInstance) error) error {
	errs := make([]error, len(insts)*redisInstanceConns)
	var wg sync.WaitGroup
	for g := range errs {
		wg.Go(func() { errs[g] = fn(g, insts[g%len(insts)]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// countTrips is the round trips of all of insts' clients.
func countTrips(insts []redisInstance) int64 {
	var n int64
	for _, inst := range insts {
		n += inst.trips()
	}
	return n
}

// scripts is how many scripts the redis-server at addr has run: its
// EVALSHA and EVAL calls.
func scripts(b *testing.B, addr string) int64 {
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		calls, _, _ := strings.Cut(rest, ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			b.Fatalf("commandstats: %q", line)
		}
		n += v
	}
	return n
}
