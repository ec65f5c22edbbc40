// Package bench holds the benchmarks behind the performance targets of
// ratestore (DESIGN.md, "Performance targets"): ratestore measured side by
// side, in the same run, against the baselines those targets are stated
// against.
//
//   - BenchmarkHot, BenchmarkHotParallel: one in-memory decision (key cached,
//     Async mode) per strategy, against golang.org/x/time/rate Limiters in a
//     mutex-guarded map of as many keys.
//   - BenchmarkSync: fsynced decisions with 1, 8 and 64 concurrent callers on
//     bbolt and badger, against one bbolt Update (read, decide, write, fsync)
//     per decision.
//   - BenchmarkAsync: Async throughput on every core with 10k keys.
//   - BenchmarkApply, BenchmarkClock: the algorithms alone and one
//     time.Now, to attribute a hot decision's time to the strategy, the
//     clock or the engine.
//
// It is a module of its own so that the peers it compares against are
// dependencies of the benchmarks only, never of the library. See README.md
// for how to run it and how to read the results.
package bench
