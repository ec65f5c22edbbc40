package main

import (
	"fmt"
	"strings"
)

// The toolkit's benchmarks (bench/reserve_test.go, bench/serve_test.go):
// reservations, waiting in line, and `ratestore serve`'s RESP side.
const (
	reserveXrate     = "Reserve/impl=xrate"
	reserveOurs      = "Reserve/impl=ratestore"
	waitFIFO         = "WaitFIFO"
	serveTarget      = 50_000 // decisions/s over 64 RESP connections
	waitRateErrLimit = 1.0    // %
)

// BenchmarkRedis's sides, baseline first, and its target.
const (
	redisRate      = "Redis/impl=redis_rate"
	redisOurs      = "Redis/impl=redisstore"
	redisTargetMax = 1.2 // redisstore's time over redis_rate's
)

// BenchmarkRedisInstances' workloads and sides, baseline first.
var (
	redisInstWorkloads = []string{"hot", "10k"}
	redisInstImpls     = []string{"redis_rate", "redisstore"}
)

func redisInstName(workload, impl string) string {
	return "RedisInstances/workload=" + workload + "/impl=" + impl
}

// serveImpls are BenchmarkServeRESP's sides.
var serveImpls = []string{"ratestore-async", "ratestore-sync", "redis-lua"}

func serveName(impl string) string { return "ServeRESP/impl=" + impl }

// toolkitChecks are the targets of the toolkit's issue: Wait's order and
// rate, and the RESP server's throughput.
func (v *view) toolkitChecks() []check {
	reordered, ok := v.any(waitFIFO, "reordered")
	rateErr, _ := v.any(waitFIFO, "rate-err-%")
	cs := []check{{id: "wait-fifo", what: "Wait: 1000 waiters on one key at 100/s served in arrival order, rate within 1%",
		measured: fmt.Sprintf("reordered %.0f, rate off by %.3f%%", reordered, rateErr), ok: ok,
		met: reordered == 0 && rateErr <= waitRateErrLimit}}
	rate, ok := v.any(serveName("ratestore-async"), "decisions/s")
	measured := fmtRate(rate) + " (Async)"
	if sync, ok := v.any(serveName("ratestore-sync"), "decisions/s"); ok {
		measured += ", " + fmtRate(sync) + " (Sync)"
	}
	if lua, ok := v.any(serveName("redis-lua"), "decisions/s"); ok {
		measured += "; redis-server + GCRA Lua " + fmtRate(lua)
	}
	cs = append(cs, check{id: "serve-resp", what: "serve, RESP over loopback, 64 connections: >= 50k decisions/s",
		measured: measured, ok: ok, met: rate >= serveTarget})

	x, _, _, ok := v.ix.ratio(redisOurs, redisRate, 0, "ns/op")
	trips, _ := v.any(redisOurs, "round-trips/op")
	cs = append(cs, check{id: "redis-gcra", what: "Redis, GCRA, 64 connections: redisstore within 1.2× of redis_rate, one round trip a decision",
		measured: fmt.Sprintf("%s, %.2f round trips/decision", v.ratio(redisOurs, redisRate, 0, "ns/op"), trips), ok: ok,
		met: x <= redisTargetMax && trips < 1.05})
	return append(cs, v.redisInstanceChecks()...)
}

// redisInstanceChecks are BenchmarkRedisInstances' targets: redisstore's
// decisions/s at least redis_rate's, on each workload.
func (v *view) redisInstanceChecks() []check {
	var cs []check
	for _, w := range redisInstWorkloads {
		ours, base := redisInstName(w, "redisstore"), redisInstName(w, "redis_rate")
		x, _, _, ok := v.ix.ratio(ours, base, 0, "decisions/s")
		trips, _ := v.any(ours, "round-trips/op")
		baseTrips, _ := v.any(base, "round-trips/op")
		what := "Redis, 4 instances × 16 connections, keys drawn from 10k: redisstore >= redis_rate's decisions/s"
		if w == "hot" {
			what = "Redis, 4 instances × 16 connections, one hot key: redisstore >= redis_rate's decisions/s"
		}
		cs = append(cs, check{id: "redis-instances-" + w, what: what, ok: ok, met: x >= 1,
			measured: fmt.Sprintf("%s, %.2f round trips/decision (redis_rate %.2f)",
				v.ratio(ours, base, 0, "decisions/s"), trips, baseTrips)})
	}
	return cs
}

func (v *view) toolkit(b *strings.Builder) {
	_, okServe := v.any(serveName("ratestore-async"), "decisions/s")
	_, okReserve := v.any(reserveOurs, "ns/op")
	_, okWait := v.any(waitFIFO, "reordered")
	_, okRedis := v.any(redisOurs, "ns/op")
	okInst := v.ranRedisInstances()
	if !okServe && !okReserve && !okWait && !okRedis && !okInst {
		return // the families did not run
	}
	b.WriteString("## Toolkit: reservations, waiting, serve, Redis (BenchmarkReserve, BenchmarkWaitFIFO, BenchmarkServeRESP, " +
		"BenchmarkRedis, BenchmarkRedisInstances)\n\n")
	b.WriteString("**Reserve + Cancel.** A reservation made and cancelled on keys cycled from 10k, each booked " +
		"ahead so that it waits: ratestore's Limiter.Reserve and Reservation.Cancel (GCRA, Async bbolt) against " +
		"x/time/rate's ReserveN and CancelAt on a Limiter per key in a mutex-guarded map. ratestore's reservation " +
		"keeps the key's state before and after it (so that Cancel can restore it exactly) and commits both " +
		"changes; *x* is its time over x/time/rate's, within one invocation.\n\n")
	t := &table{head: []string{"side", "ns/op", "allocs", "x"}}
	for _, r := range []struct{ label, name string }{{"x/time/rate", reserveXrate}, {"ratestore", reserveOurs}} {
		ns, ok := v.any(r.name, "ns/op")
		if !ok {
			continue
		}
		allocs, _ := v.any(r.name, "allocs/op")
		x := "–"
		if r.name == reserveOurs {
			x = v.ratio(reserveOurs, reserveXrate, 0, "ns/op")
		}
		t.add(r.label, fmtNs(ns), fmt.Sprintf("%.0f", allocs), x)
	}
	b.WriteString(t.String())

	if okWait {
		reordered, _ := v.any(waitFIFO, "reordered")
		rateErr, _ := v.any(waitFIFO, "rate-err-%")
		fmt.Fprintf(b, "**Wait in line.** 1000 goroutines call Limiter.Wait on one key of a GCRA at 100 per second "+
			"(burst 1, Async bbolt, the system clock), each once the one before has its place: the largest distance "+
			"between a waiter's place in arrival order and in serving order is **%.0f**, and the rate at which they "+
			"were served, first to last, is off 100/s by **%.3f%%** (targets: 0, within 1%%).\n\n", reordered, rateErr)
	}

	if okServe {
		v.serve(b)
	}

	if okRedis {
		v.redis(b)
	}
	if okRedis || okInst {
		v.redisInstances(b)
	}
}

// serve is BenchmarkServeRESP's table.
func (v *view) serve(b *strings.Builder) {
	b.WriteString("**serve over RESP.** 64 connections, one request at a time each (no pipelining), " +
		"CL.THROTTLE on keys drawn from 10k, every call allowed; *redis-lua* is Debian's redis-server (no " +
		"persistence) running a GCRA Lua script by EVALSHA with the same reply, what a program that wants " +
		"CL.THROTTLE without the redis-cell module runs, in the same invocation. Target: >= 50k decisions/s " +
		"on 2 cores.\n\n")
	t := &table{head: []string{"side", "decisions/s"}}
	for _, impl := range serveImpls {
		if rate, ok := v.any(serveName(impl), "decisions/s"); ok {
			t.add(impl, fmtRate(rate))
		}
	}
	b.WriteString(t.String())
}

// redis is BenchmarkRedis' table: one instance, 64 connections.
func (v *view) redis(b *strings.Builder) {
	b.WriteString("**Redis.** A GCRA decision on keys drawn from 10k, every call allowed, from 64 goroutines over 64 " +
		"connections to one redis-server (Debian's, no persistence) started by the benchmark: go-redis/redis_rate's " +
		"Allow (its GCRA Lua script on Redis's clock) against redisstore's Limiter.Allow (the Go decision on the " +
		"key's last seen state, stored by a compare-and-swap script), in one invocation. *round trips* is the " +
		"scripts Redis ran per decision (INFO commandstats); *x* is redisstore's time over redis_rate's. Target: " +
		"within 1.2×, one round trip.\n\n")
	t := &table{head: []string{"side", "decisions/s", "round trips", "x"}}
	for _, r := range []struct{ label, name string }{{"redis_rate", redisRate}, {"redisstore", redisOurs}} {
		rate, ok := v.any(r.name, "decisions/s")
		if !ok {
			continue
		}
		trips, _ := v.any(r.name, "round-trips/op")
		x := "–"
		if r.name == redisOurs {
			x = v.ratio(redisOurs, redisRate, 0, "ns/op")
		}
		t.add(r.label, fmtRate(rate), fmt.Sprintf("%.2f", trips), x)
	}
	b.WriteString(t.String())
}

// ranRedisInstances reports whether any result of BenchmarkRedisInstances
// is in the report.
func (v *view) ranRedisInstances() bool {
	for _, w := range redisInstWorkloads {
		for _, impl := range redisInstImpls {
			if _, ok := v.any(redisInstName(w, impl), "decisions/s"); ok {
				return true
			}
		}
	}
	return false
}

// redisInstances is BenchmarkRedisInstances' table: a row per workload and
// side, "not run" for one absent from the report.
func (v *view) redisInstances(b *strings.Builder) {
	b.WriteString("**Redis, several instances.** 4 instances of a program in one process share limits on one " +
		"redis-server (Debian's, no persistence; one per side, started by the benchmark), each instance its own " +
		"client with a pool of 16 connections and its own limiter (go-redis/redis_rate's, or a redisstore DB's), " +
		"and 16 goroutines each, 64 in all; every call is a GCRA decision, allowed. *hot*: every call on one key, " +
		"so what an instance last saw of it is mostly stale; *10k*: keys drawn uniformly from 10k. Before the " +
		"timer every instance calls every key once. *round trips* is the clients' round trips per decision (a " +
		"command or a pipeline is one; counted by a go-redis hook), *scripts* the scripts Redis ran per decision " +
		"(INFO commandstats: EVALSHA, EVAL); *x* is redisstore's decisions/s over redis_rate's, in one invocation. " +
		"Target: x >= 1.0 on both workloads.\n\n")
	t := &table{head: []string{"workload", "side", "decisions/s", "round trips", "scripts", "x"}}
	for _, w := range redisInstWorkloads {
		for _, impl := range redisInstImpls {
			name := redisInstName(w, impl)
			rate, ok := v.any(name, "decisions/s")
			if !ok {
				t.add(w, impl, "not run", "–", "–", "–")
				continue
			}
			trips, _ := v.any(name, "round-trips/op")
			scripts, _ := v.any(name, "scripts/op")
			x := "–"
			if impl == "redisstore" {
				x = v.ratio(name, redisInstName(w, "redis_rate"), 0, "decisions/s")
			}
			t.add(w, impl, fmtRate(rate), fmt.Sprintf("%.2f", trips), fmt.Sprintf("%.2f", scripts), x)
		}
	}
	b.WriteString(t.String())
}
