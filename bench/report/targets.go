package main

import (
	"fmt"
	"slices"
	"strings"
)

// defaultMaxCachedKeys and fillBatch mirror ratestore.DefaultMaxCachedKeys
// and the bench package's fill: the table may exceed the cache limit by
// the changes not yet committed, at most one batch.
const (
	defaultMaxCachedKeys = 1 << 18
	fillBatch            = 1 << 16
)

// check is one DESIGN.md target as measured.
type check struct {
	id, what, measured string
	met, ok            bool // ok: measured at all
}

func (v *view) checks() []check {
	var cs []check
	for _, s := range hotStrategies[1:7] {
		c := check{id: "hot-" + s, what: fmt.Sprintf("hot %s decision, 10k keys: <= 1.0× x/time/rate, 0 allocs (paired)", s)}
		med, _, _, ok := v.ix.spread(pairedName(s), 0, "ratio-vs-xrate")
		allocs, _ := v.any(pairedName(s), "allocs/op")
		c.ok, c.met = ok, med <= 1 && allocs == 0
		c.measured = v.paired(s) + fmt.Sprintf(", %.0f allocs", allocs)
		cs = append(cs, c)
	}
	for _, backend := range backends {
		name := syncName("ratestore-"+backend, 64)
		rate, ok := v.any(name, "decisions/s")
		x, _, _, _ := v.ix.ratio(name, syncName("bbolt-update", 64), 0, "decisions/s")
		cs = append(cs, check{id: "sync-" + backend, what: "Sync " + backend + ", 64 callers: >= 10× one bbolt Update per decision, >= 40k/s",
			measured: fmt.Sprintf("%s, %s", v.ratio(name, syncName("bbolt-update", 64), 0, "decisions/s"), fmtRate(rate)),
			ok:       ok, met: x >= 10 && rate >= 40e3})
	}
	for _, backend := range backends {
		rate, ok := v.any(fmt.Sprintf("Async/backend=%s/flush=100ms/keys=10000", backend), "decisions/s")
		cs = append(cs, check{id: "async-" + backend, what: "Async " + backend + ", 10k keys, 2 cores, default flush: >= 5M decisions/s",
			measured: fmtRate(rate), ok: ok, met: rate >= 5e6})
	}
	for _, op := range []string{"check", "record"} {
		a, b := rollName(op, "rollingwindow", 100_000), rollName(op, "rollingwindow", 10)
		flat, _, _, ok := v.ix.ratio(a, b, 0, "ns/op")
		cs = append(cs, check{id: "rolling-flat-" + op, what: "rolling window " + op + ": 100k legacy windows over 10 <= 1.2",
			measured: v.ratio(a, b, 0, "ns/op"), ok: ok, met: flat <= 1.2})
		a, b = rollName(op, "legacy", 10_000), rollName(op, "rollingwindow", 10_000)
		x, _, _, ok := v.ix.ratio(a, b, 0, "ns/op")
		cs = append(cs, check{id: "rolling-x-" + op, what: "rolling window " + op + ": >= 100× the legacy filter-and-sum at 10k windows",
			measured: v.ratio(a, b, 0, "ns/op"), ok: ok, met: x >= 100})
	}
	for _, d := range []struct {
		backend string
		limit   float64
	}{{"bolt", 160}, {"badger", 100}} {
		name := fmt.Sprintf("Disk/backend=%s/keys=%d", d.backend, v.diskKeys)
		perKey, ok := v.any(name, "disk-B/key")
		cs = append(cs, check{id: "disk-" + d.backend, what: fmt.Sprintf("disk per GCRA key, %s, %s keys: <= %.0f B", d.backend, fmtInt(v.diskKeys), d.limit),
			measured: fmt.Sprintf("%.0f B", perKey), ok: ok, met: perKey <= d.limit})
		cached, ok := v.any(name, "cached-keys")
		rss, _ := v.any(name, "rss-MB")
		cs = append(cs, check{id: "memory-" + d.backend, what: fmt.Sprintf("memory bounded by the cache limit (%d keys), not by the %s keys seen (%s)", defaultMaxCachedKeys, fmtInt(v.diskKeys), d.backend),
			measured: fmt.Sprintf("%.0f keys in memory, RSS %.0f MiB", cached, rss), ok: ok, met: cached <= defaultMaxCachedKeys+fillBatch})
	}
	return cs
}

func (v *view) targets(b *strings.Builder) {
	b.WriteString("## DESIGN.md targets\n\n")
	t := &table{head: []string{"target", "measured (this run)", ""}}
	var missed []check
	for _, c := range v.checks() {
		status := "met"
		switch {
		case !c.ok:
			status, c.measured = "not measured", "–"
		case !c.met:
			status = "**missed**"
			missed = append(missed, c)
		}
		t.add(c.what, c.measured, status)
	}
	b.WriteString(t.String())
	if len(missed) == 0 {
		return
	}
	b.WriteString("### Missed targets: what bounds them\n\n")
	if slices.ContainsFunc(missed, func(c check) bool { return strings.HasPrefix(c.id, "hot-") }) {
		b.WriteString("Hot decisions: " + engineCost + "\n\n")
	}
	for _, c := range missed {
		why, ok := explanations[c.id]
		if !ok {
			why = "No analysis of this miss is recorded in the generator (bench/report/targets.go). Profile it with " +
				"`go test -run '^$' -bench <that benchmark> -cpuprofile cpu.prof` (also -memprofile, -mutexprofile, " +
				"-blockprofile) and `go tool pprof -top bench.test cpu.prof`; on this shared machine, first rerun it " +
				"when `uptime` shows little load, since a miss within the ranges above may be noise."
		}
		fmt.Fprintf(b, "- **%s** (%s): %s\n", c.what, c.measured, why)
	}
	b.WriteString("\n")
}

// engineCost is what every hot strategy's explanation starts from.
const engineCost = "A hot decision is the clock, the engine and the algorithm. CPU profiles of BenchmarkHot at 10k " +
	"keys (the alloc, mutex and block profiles are empty: 0 allocs, one goroutine, no contention) put ratestore's " +
	"engine at ~110-130 ns per decision: hashing the key, probing one of 128 shards' maps by that 64-bit hash " +
	"(shard.find and mapaccess1_fast64, ~25% of samples, mostly cache misses at 10k keys), the shard lock, and " +
	"bookkeeping x/time/rate has no need for (the entry's ref bit for eviction, its last-seen and idle instants, the " +
	"committer's dirty list and generation). That is 60-80 ns more than x/time/rate's string-keyed map and mutex. " +
	"ratestore wins most of it back on the clock (one monotonic read, ~30-40 ns less than time.Now, which is a third " +
	"of x/time/rate's profile) and on arithmetic (the prepared GCRA decides in ~17-25 ns, x/time/rate's float token " +
	"bucket in ~65-70 ns): GCRA lands ~5% above x/time/rate, and every other strategy adds what its arithmetic costs " +
	"beyond GCRA's (the *algorithm alone* column; ~2 ns is ~1% of the ratio). The background committer (~12-15% of " +
	"samples, on the other core) is not what separates the strategies."

// explanations are the analyses of targets known to be missed, from the
// profiles taken when this generator was written (the profiles of this
// run's slowest strategies are at the end of the report).
var explanations = map[string]string{
	"hot-gcra": "GCRA is the cheapest strategy (integer arithmetic on one instant, ~17-25 ns alone), so what " +
		"remains is the engine. Paired with x/time/rate it has measured from 0.88x to 1.10x across runs of this " +
		"generator on this machine, while an A/A control of the paired method (x/time/rate against itself, GCRA " +
		"against itself) gives 1.00-1.01: the spread is the machine's state from one run to the next, and GCRA sits " +
		"at the target, within ~10% either side (the committed results of 2026-11-21 measured 0.80-0.90x with " +
		"BenchmarkHot run sequentially at -count 5). What would put it clearly under: ~10-20 ns off the engine. The " +
		"largest share is the table probe (shard.find and mapaccess1_fast64: a Go map from the 64-bit hash to a " +
		"40-byte ref, two to three cache misses at 10k keys); an open-addressing table holding the refs inline would " +
		"make it one. The clock read (runtime.nanotime, ~15% of samples) is the other lever, but a coarser clock " +
		"changes what callers see.",
	"hot-slidingwindow": "The sliding window's arithmetic (two counters and a weighted sum, ~25-45 ns alone) adds " +
		"to the engine gap GCRA shows (see there): ~1.1-1.2x paired. The same engine work would bring it to ~1.0x.",
	"hot-tokenbucket": "The token bucket keeps float64 tokens like x/time/rate, ~30-35 ns alone, ~10 ns more " +
		"than GCRA: ~1.1x paired (1.0x on the sequential runs of 2026-11-21). What it would take: integer " +
		"arithmetic, as GCRA's (a token bucket of rate r and burst b decides exactly like GCRA with T = 1/r and the " +
		"same burst, so it could be prepared into GCRA's arithmetic on its own state encoding).",
	"hot-leakybucket": "The leaky bucket's level is float64: draining it (elapsed x rate), the fit check and turning " +
		"ResetAfter and RetryAfter back into integer nanoseconds (bucket.at, bucket.wait, ~15% of samples) cost " +
		"~15-25 ns more than GCRA's integer arithmetic: ~1.15-1.2x paired." +
		" What it would take: the same as for the token bucket, integer arithmetic (a leaky bucket used as a meter " +
		"is GCRA with Burst = Capacity).",
	"hot-fixedwindow": "Two quotas (second and minute) are two window updates, two Results and a merge per call, " +
		"plus a check of the state's quota names against the configuration's on every call (fixedWindowState.laidOut, " +
		"~5% of samples): FixedWindow.decide is ~30% of the profile, ~100 ns alone, against ~17 ns for GCRA." +
		" What it would take: compute the Result of a quota only when it binds (the merge keeps the " +
		"binding one; the others' Remaining/ResetAfter are thrown away), and check the layout by a configuration " +
		"generation stored with the state instead of comparing names. That would bring it near GCRA plus a few ns per " +
		"quota, around 1.1-1.2x; under 1.0 is unlikely while it writes two counters per call.",
	"hot-composite": "A composite runs two strategies per call, GCRA and a one-quota fixed window, and merges their " +
		"Results (Composite.decide ~37% of samples, ~150 ns alone): it costs about nop + GCRA + fixed window." +
		" What it would take: the fixed-window changes above, and skipping the secondary's Result " +
		"computation when the primary already denies or binds. Two limits in one call cannot cost what one x/time/rate " +
		"call costs; 1.3-1.5x is a realistic goal, and the DESIGN.md target should say so for composite strategies.",
	"async-bolt": "Async throughput on 2 cores is the callers' decisions (~150-200 ns each) plus the committer's " +
		"work, which is per dirty key per interval (10k keys every 100 ms: ~100k state writes/s, a few % of the cores). " +
		"Runs of this family have ranged 4.9-8.9M/s on this shared machine with no code change, so a miss just under " +
		"5M/s is first the load of other processes: rerun when `uptime` shows little load.",
	"async-badger": "Async throughput on 2 cores is the callers' decisions plus the committer's work, per dirty key " +
		"per interval. badger's commit of 10k keys (its memtable insert, its own write-ahead log, and compactions " +
		"running on the same 2 cores) costs more than bbolt's write-ahead append, and shows more under load: runs of " +
		"this family have ranged 3-6.6M/s on this shared machine with no code change. Rerun when `uptime` shows little " +
		"load; if it still misses, profile the committer (-cpuprofile on BenchmarkAsync/backend=badger) for " +
		"badger's share.",
	"sync-bolt": "A Sync decision waits for the group commit holding it: one append to the write-ahead log and one " +
		"fdatasync, then every caller of the group returns. With 64 callers throughput is about 64 decisions per " +
		"(fdatasync + commit) time, so it tracks the fdatasync latency measured in the Machine table (~110-120 µs " +
		"assumed by DESIGN.md, 130-300 µs seen here) and the checkpoints into bbolt that run inside some Syncs; on a " +
		"slow or busy disk, rerun and compare x, the ratio to the baseline on the same disk.",
	"sync-badger": "A Sync decision on badger waits for its group: badger's transaction commit (no fsync) and one " +
		"DB.Sync, which fsyncs badger's memtable log and its value log; it has measured about half of bolt's " +
		"throughput here, and tracks the fdatasync latency in the Machine table. On a slow " +
		"or busy disk, rerun and compare x, the ratio to the baseline on the same disk.",
	"rolling-flat-check":  rollingNoise,
	"rolling-flat-record": rollingNoise,
}

// rollingNoise explains a rolling-window flatness miss.
const rollingNoise = "Ours is ~35-50 ns per operation on a ring of at most 60 buckets whatever the legacy history " +
	"(the migration folds the history into those buckets). At -benchtime 1s, 10 and 100k windows measure within " +
	"~5% of each other (record, when this generator was written: 36-43 ns against 40-45 ns), so a ratio above 1.2 " +
	"between two short measurements of ~40 ns taken seconds apart is noise of the shared machine: rerun."
