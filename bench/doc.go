// Package bench holds the benchmarks behind the performance targets of
// ratestore (DESIGN.md, "Performance targets"): ratestore measured side by
// side, in the same run, against the baselines those targets are stated
// against.
//
//   - BenchmarkHot, BenchmarkHotParallel: one in-memory decision (key cached,
//     Async mode) per strategy, against golang.org/x/time/rate Limiters in a
//     mutex-guarded map of as many keys; BenchmarkHotPaired, the same
//     comparison with both sides taking turns in blocks of 1024 decisions
//     (and, for a strategy of two limits, against two Limiters per key).
//   - BenchmarkPeers: ratestore (Async, Sync, cold) next to x/time/rate,
//     throttled, go-limiter, ulule/limiter and ajiwo/ratelimit, at 1, 10k and
//     1M keys, uniform and Zipf-skewed key choice.
//   - BenchmarkSync: fsynced decisions with 1, 8, 64 and 256 concurrent
//     callers on bbolt and badger, with p50/p99 latency, against one bbolt
//     Update (read, decide, write, fsync) per decision.
//   - BenchmarkDisk: bytes per key on disk, memory and Open at 1M keys.
//   - BenchmarkAsync: Async throughput on every core with 10k keys.
//   - BenchmarkApply, BenchmarkClock: the algorithms alone and one
//     time.Now, to attribute a hot decision's time to the strategy, the
//     clock or the engine.
//   - BenchmarkAdminKeysPage, BenchmarkAdminKeysWalk, BenchmarkAdminLedger,
//     BenchmarkAdminSmall: the operator's surface, the admin API as served:
//     a page of keys at 1M keys against the whole list it replaced, a walk
//     of every page at 10M keys and its heap, the ledger's worst allowed
//     queries at 10M entries on bolt and Redis, and every call at 10 keys
//     against 786b47c's gateway.
//
// It is a module of its own so that the peers it compares against are
// dependencies of the benchmarks only, never of the library. See README.md
// for how to run it and how to read the results, and ./report for the
// command that runs a bounded set and writes REPORT.md.
package bench
