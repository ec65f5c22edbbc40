package bench

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

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
