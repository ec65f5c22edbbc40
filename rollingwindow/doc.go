// Package rollingwindow counts usage over a rolling window cut into time
// buckets, in O(1) amortized time per call: the arithmetic behind
// strategies.RollingWindow and the token window of package keystore (say,
// 100k tokens per 5 hours in 5-minute buckets).
//
// It is pure arithmetic: nothing here does I/O, reads a clock or allocates
// per call once a State has reached its working size. The instant of every
// call is passed in as Unix nanoseconds, which lets the engine decide under
// a per-key lock and lets tests drive a State with fake instants. A State is
// not safe for concurrent use; its owner locks it.
//
// # The window
//
// Time is cut into buckets of Config.Bucket nanoseconds aligned to the Unix
// epoch. Usage recorded at instant t lands in the bucket that starts at
//
//	start(t) = floor(t/Bucket)*Bucket
//
// (floor, not truncation: t = -1 lands in the bucket [-Bucket, 0)). A bucket
// counts at instant now while
//
//	start > now - Window
//
// so it stops counting at exactly start + Window: a call at that instant no
// longer sees it, a call one nanosecond earlier does. Every duration this
// package returns is exact to the nanosecond under that rule.
//
// # Precision
//
// Usage recorded at t counts for Window - (t - start(t)) nanoseconds: at
// least Window - Bucket + 1ns, at most Window. Compared with an exact sliding
// window it expires up to one Bucket early, never late. With 5 hours in
// 5-minute buckets, usage is forgotten between 4h55m and 5h after it was
// recorded. A finer Bucket is more precise and keeps more buckets: up to
// Window/Bucket of them are live at once.
//
// # Representation and cost
//
// A State is a sparse ring: only the buckets that hold usage are kept, oldest
// first, in a ring buffer (a slice used circularly from a head index) that
// grows by doubling, from 4 slots up to the power of two at or above
// Window/Bucket, and shrinks only when Reconfigure leaves it larger than
// that. Each slot holds a bucket's start and the cumulative count of all
// buckets up to and including it,
//
//	c_i = n_1 + ... + n_i   (mod 2^64),  base = c of the last bucket popped,
//
// so that the usage in the window and the count of bucket i are
//
//	used = c_last - base,   n_i = c_i - c_(i-1).
//
// Sums wrap around modulo 2^64 but every difference taken is at most
// math.MaxInt64 (the used total never passes it), so it is exact.
//
// Add touches only the newest bucket, or pushes a new one: O(1), plus the
// copy of a doubling, which costs O(1) amortized per push (a geometric
// series: the copies into rings of 4, 8, ..., 2^j slots move fewer than 2^j
// buckets in all) and happens at most log2(MaxBuckets) = 16 times in the life
// of a State. Expire pops the expired buckets from the oldest end: it looks
// at the oldest bucket, O(1) when nothing has expired; otherwise it finds the
// first live bucket by a galloping search over the starts, which increase
// (probe 1, 2, 4, ... buckets ahead, then bisect the last gap), and sets base
// to the cumulative count before it, in O(1 + log j) for j popped buckets,
// never walking them. Each bucket is created once (by Add, or by the rare
// AddAt and Append) and popped once, so m calls that create P <= m buckets
// cost
//
//	sum over calls of O(1 + log j_call) <= O(m + sum j_call) <= O(m + P) = O(m)
//
// that is O(1) amortized per call, and O(log(Window/Bucket)) <= 16 probes in
// the worst single call. Used is Expire plus one subtraction. RetryAfter
// bisects the cumulative counts for the first bucket whose expiry frees
// enough, O(log k) for k live buckets; ResetAfter reads the newest bucket,
// O(1). The legacy filter-and-sum over a list of windows is O(number of
// windows) per check instead.
//
// # MaxBuckets
//
// Window/Bucket may not exceed MaxBuckets = 65536. That bounds the memory
// of one key's State at 1 MiB of ring (16 bytes a slot) and what its
// encoding must hold at 65536 buckets, the O(buckets) paths (Rebuild, AddAt,
// Reconfigure) at 65536 steps, and every search at 16 probes. A finer grain
// buys nothing a rate limit needs: at MaxBuckets the early expiry is under
// 0.002% of the window (a 5-hour window in 300 ms buckets is 60000 of them).
//
// # A clock that goes backwards
//
// An instant earlier than a previous one never panics and never corrupts a
// State, and nothing expires early because of it: expiry only moves forward
// (buckets dropped at a later instant stay dropped, and an earlier instant
// drops none that a later one kept), and usage recorded at an instant whose
// bucket is older than the newest bucket is added to the newest bucket, so
// it expires no earlier than the usage already recorded. Durations are
// measured from the instant given: a bucket of the "future" counts, and
// expires Window after its start. A State that holds nothing is like a
// fresh one: it keeps no memory of the instants it saw.
//
// # Saturation
//
// The used total never passes math.MaxInt64: the part of an Add that would
// take it past is not counted. Instants saturate at the ends of the int64
// range: the few instants before the first whole bucket of the range (a
// Bucket at most after math.MinInt64, in 1677) land in that first whole
// bucket, and durations that do not fit (a start near the end of the range,
// in 2262) are reported as math.MaxInt64.
//
// # Encoding and legacy usage
//
// The stored encoding belongs to package strategies; this package gives a
// codec what it needs. All yields the live buckets as (start, n), oldest
// first, and Rebuild (or Append, one bucket at a time) makes a State from
// them again, validating what it is given. AddAt merges usage at an
// arbitrary past instant, as the migration of legacy usage windows does.
package rollingwindow
