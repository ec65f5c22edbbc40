package strategies

import (
	"math"
	"time"

	"github.com/ratestore/ratestore/internal/sat"
)

// bucket is the Decider of TokenBucket and LeakyBucket, which share their
// arithmetic. Both hold
// one amount that moves continuously, at rate per second, towards a resting
// value, and a call moves it the other way:
//
//	token bucket: tokens rise to Burst; a call takes n; it fits while tokens - n >= 0
//	leaky bucket: the level falls to 0; a call adds n; it fits while level + n <= Capacity
//
// With sign = +1 for tokens and -1 for a level, both read:
//
//	at instant t: amount + sign*rate*(t - last), stopped at rest
//	a call of n:  amount - sign*n
//	room:         sign*(amount - far)   = tokens,         Capacity - level
//	in use:       sign*(rest - amount)  = Burst - tokens, level
//
// and a call fits when the room left after it is not negative. Multiplying
// by ±1 is exact in floating point, so every formula is literally the one
// of its strategy.
//
// Once the amount is back at rest the bucket is indistinguishable from a
// new one, and the instant it got there no longer matters: at then moves
// last to the instant asked about, even an earlier one. That is what makes
// a ResetAfter of 0 mean exactly "equivalent to a fresh state", so the
// engine can delete such states. Away from rest, last never moves
// backwards: a clock going backwards gives no refill and no penalty.
type bucket struct {
	perNano float64 // the rate per nanosecond: Rate/1e9
	perUnit float64 // 1/perNano, nanoseconds per unit: what wait multiplies by
	slack   float64 // perUnit*2^-48: wait's margin, in nanoseconds per unit of magnitude
	rest    float64 // where the amount settles: Burst tokens, level 0
	far     float64 // the bound a call may not cross: 0 tokens, level Capacity
	sign    float64 // +1 for tokens (rising to rest), -1 for a level (falling)
	bound   float64 // max(|rest|, |far|) = |rest + far|, one being 0: its share of wait's magnitudes
	limit   int64   // Burst or Capacity, for Result.Limit and RetryAfter -1
}

// newBucket computes the constants of a bucket from its configuration,
// which every call needs: once per limiter handle.
func newBucket(rate, rest, far, sign float64, limit int64) *bucket {
	perNano := rate / nanosPerSecond
	perUnit := 1 / perNano
	return &bucket{perNano, perUnit, perUnit * 0x1p-48, rest, far, sign, math.Abs(rest + far), limit}
}

// NewState implements Decider: a full token bucket, an empty leaky one.
func (b *bucket) NewState() State {
	if b.sign > 0 {
		return &tokenBucketState{bucketState{amount: b.rest}}
	}
	return &leakyBucketState{}
}

// Decode implements Decider (see TokenBucket.Prepare and
// LeakyBucket.Prepare).
func (b *bucket) Decode(enc []byte) (State, error) {
	if b.sign > 0 {
		v, err := decodeBucket(enc, kindTokenBucket, "tokens", -maxAmount)
		if err != nil {
			return nil, err
		}
		return &tokenBucketState{v}, nil
	}
	v, err := decodeBucket(enc, kindLeakyBucket, "level", 0)
	if err != nil {
		return nil, err
	}
	return &leakyBucketState{v}, nil
}

// bucketState is the stored state of both buckets: the amount as of last.
// The amount may lie beyond rest when the configuration changed since it
// was stored (tokens above a lowered Burst); at clamps it.
type bucketState struct {
	amount float64 // tokens or level, in [-maxAmount, maxAmount]
	last   int64   // Unix nanoseconds
}

func (b *bucket) room(amount float64) float64  { return b.sign * (amount - b.far) }
func (b *bucket) inUse(amount float64) float64 { return b.sign * (b.rest - amount) }

// at returns the state as of now.
func (b *bucket) at(s bucketState, now int64) bucketState {
	if now > s.last {
		s.amount += b.sign * b.drained(s.last, now)
		s.last = now
	}
	if b.inUse(s.amount) <= 0 {
		s.amount, s.last = b.rest, now
	}
	return s
}

// fits reports whether a call of need leaves the room after it
// non-negative: tokens - need >= 0, Capacity - (level + need) >= 0.
func (b *bucket) fits(amount, need float64) bool { return b.room(amount-b.sign*need) >= 0 }

// Decide implements Decider: a token bucket (sign +1) takes the states of
// TokenBucket, a leaky bucket those of LeakyBucket.
func (b *bucket) Decide(st State, c Call) (res Result, err error) {
	s := b.stateOf(st)
	if s == nil {
		return Result{}, b.wrongState(st)
	}
	n := float64(c.N)
	v := b.at(*s, c.Now)
	allowed := b.fits(v.amount, n)

	// base is the state as stored after the call (as if made, for a
	// DryRun): the durations are measured on it exactly as later calls
	// will see it.
	base := *s
	if allowed || c.Record {
		v.amount = clampAmount(v.amount - b.sign*n)
		if c.N > 0 {
			base = v
			if !c.DryRun {
				*s = v
			}
		}
		if c.Record {
			allowed = b.fits(v.amount, 0) // Record reports what Peek would say
			n = 0
		}
	}

	// min: a float64 holds a limit above 2^53 only to the nearest few
	// units, so the room can round past it.
	res = Result{Allowed: allowed, Limit: b.limit, Remaining: min(floorCount(b.room(v.amount)), b.limit)}
	if short := b.inUse(v.amount); short > 0 {
		res.ResetAfter = b.wait(base, c.Now, short, -1)
	}
	if !allowed {
		if !c.Record && c.N > b.limit {
			res.RetryAfter = -1
		} else {
			res.RetryAfter = b.wait(base, c.Now, n-b.room(v.amount), n)
		}
	}
	return res, nil
}

// Clamp implements Decider: a last after now, which only a clock that ran ahead and
// came back leaves behind, and from which the bucket would not move until
// the clock got there again. It becomes now, the amount as it is: the
// bucket drains or refills from now on, in at most horizon (plus what a
// Record put past the limit, which is usage and stays).
func (b *bucket) Clamp(st State, now int64) bool {
	s := b.stateOf(st)
	if s == nil || s.last <= now {
		return false
	}
	s.last = now
	return true
}

// Horizon implements Decider: from empty to full, or full to empty,
// limit/rate, saturated.
func (b *bucket) Horizon() time.Duration {
	if x := float64(b.limit) * b.perUnit; x < 0x1p63 {
		return time.Duration(math.Ceil(x))
	}
	return math.MaxInt64
}

// stateOf returns the bucket state of st, a token bucket's (sign +1) or a
// leaky bucket's (sign -1), or nil for any other state. It is small enough
// to be inlined into Decide, which runs on every call; wrongState is the
// error for a nil.
func (b *bucket) stateOf(st State) *bucketState {
	switch v := st.(type) {
	case *tokenBucketState:
		if b.sign > 0 {
			return &v.bucketState
		}
	case *leakyBucketState:
		if b.sign < 0 {
			return &v.bucketState
		}
	}
	return nil
}

// wrongState returns the error for st, a state stateOf refused.
func (b *bucket) wrongState(st State) error {
	if b.sign < 0 {
		return wrongState(kindLeakyBucket, st)
	}
	return wrongState(kindTokenBucket, st)
}

// wait returns the time from now until base, as of then, fits a call of
// need, or is at rest for a need < 0: a goal it has not reached as of now.
// short is the amount missing, from which the rate gives the wait in exact
// arithmetic; a base whose last lies after now (a clock gone backwards)
// starts moving only at last.
//
// The answer must be exact under the floating-point arithmetic that Decide
// will use at now+d: a call made then is allowed, one made a nanosecond
// earlier is not. The exact wait, rounded up, is checked with that very
// arithmetic (reached). It passes, and a nanosecond less could only pass
// too when rounding the amounts moves their threshold by more than the
// fraction of a nanosecond the rounding up added: rarely, and then, as when
// the check fails, search finds the answer.
//
// This runs on nearly every call (every allowed one has a ResetAfter), so
// what depends on the configuration alone is computed once, in b: x is
// short times perUnit rather than short over perNano (one more rounding,
// far inside the margin), and the margin's factor is slack. TestBucketWait
// checks the answers against search alone.
func (b *bucket) wait(base bucketState, now int64, short, need float64) time.Duration {
	x := short * b.perUnit // the wait in exact arithmetic, in nanoseconds
	if !(x < 0x1p62) {
		return b.search(base, now, math.MaxInt64/2, need)
	}
	up := math.Ceil(x)
	est := sat.Add(nonNeg(sat.Sub(base.last, now)), max(int64(up), 1))
	// Each of the few operations that compute an amount of magnitude m is
	// off by up to m*2^-53, which moves the instant it reaches the goal by
	// that much over the rate (perUnit nanoseconds per unit), and x itself
	// is computed from such amounts: all told less than 2^-49*m*perUnit.
	// Twice that is the margin by which est-1 must lie below x. (When up
	// <= 1, est-1 is not after now or last anyway: never reached.)
	//
	// mag is max(|amount|, bound, need) + short, by comparisons: bound
	// and need are never NaN nor -0, so the built-in max, which spends
	// instructions ordering those, answers alike.
	mag := math.Abs(base.amount)
	if b.bound > mag {
		mag = b.bound
	}
	if need > mag {
		mag = need
	}
	mag += short
	if x-up+1 > mag*b.slack && b.reached(base, now, est, need) {
		return time.Duration(est)
	}
	return b.search(base, now, est, need)
}

// search returns the smallest d >= 1 for which reached holds, from an
// estimate: it gallops from est towards the answer and then bisects. It
// relies on reached being monotone in d, which at is: the amount only
// moves towards rest as time goes by. When no int64 d works, the answer is
// math.MaxInt64: practically never.
func (b *bucket) search(base bucketState, now, est int64, need float64) time.Duration {
	est = max(est, 1)
	lo, hi := est-1, est // until set up below: !reached(lo), reached(hi)
	if b.reached(base, now, hi, need) {
		for step := int64(1); lo > 0 && b.reached(base, now, lo, need); step = sat.Add(step, step) {
			hi, lo = lo, max(lo-step, 0) // reached(0) is false: the goal is not reached now
		}
	} else {
		for step := int64(1); !b.reached(base, now, hi, need); step = sat.Add(step, step) {
			if hi == math.MaxInt64 {
				return math.MaxInt64
			}
			lo, hi = hi, sat.Add(hi, step)
		}
	}
	for hi-lo > 1 {
		if mid := lo + (hi-lo)/2; b.reached(base, now, mid, need) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return time.Duration(hi)
}

// reached reports whether base, as of d after now, fits a call of need, or
// is at rest for a need < 0.
func (b *bucket) reached(base bucketState, now, d int64, need float64) bool {
	x := b.at(base, sat.Add(now, d)).amount
	if need < 0 {
		return b.inUse(x) <= 0
	}
	return b.fits(x, need)
}

// drained returns how much the rate moves the amount in the time from last
// to now; nothing when now is not after last (a clock going backwards gives
// no refill). The difference is taken in uint64 so that no pair of instants
// overflows; a result too large for float64 is +Inf, which at clamps.
func (b *bucket) drained(last, now int64) float64 {
	if now <= last {
		return 0
	}
	return float64(uint64(now)-uint64(last)) * b.perNano
}

// nanosPerSecond converts the per-second rates of the configurations.
const nanosPerSecond = 1e9

// maxAmount bounds the amounts (tokens, level) in both directions: 2^63,
// the largest burst or capacity there can be. A Record that would go
// further saturates there.
const maxAmount = 0x1p63

// clampAmount bounds an amount to [-maxAmount, maxAmount]: the answer of
// min(max(x, -maxAmount), maxAmount) for every x, NaN and -0 included
// (which comparisons leave as they are), without the instructions that
// the built-in min and max of floats spend ordering them.
func clampAmount(x float64) float64 {
	if x < -maxAmount {
		return -maxAmount
	}
	if x > maxAmount {
		return maxAmount
	}
	return x
}

// decodeBucket reads the encodings that the two buckets share, for kind k
// whose amount (tokens or level) lies in [lo, maxAmount]:
//
//	current: <header>|amount|last
//	v1:      v1|amount|last|capacity|rate  (capacity and rate are ignored)
//	v2:      v2|amount|last|
func decodeBucket(b []byte, k *kind, amount string, lo float64) (bucketState, error) {
	f, r, err := openState(b, k)
	if err != nil {
		return bucketState{}, err
	}
	var s bucketState
	s.amount = r.float(amount, lo, maxAmount, lo >= 0)
	s.last = r.int("last", math.MinInt64, math.MaxInt64)
	switch f {
	case formatV1:
		r.float("capacity", 0, math.MaxFloat64, false)
		r.float("rate", 0, math.MaxFloat64, false)
	case formatV2:
		r.empty("end")
	}
	return s, r.done()
}

// appendBucket appends the current encoding of s for kind k.
func appendBucket(dst []byte, k *kind, s bucketState) []byte {
	dst = k.appendHeader(dst)
	dst = appendFloat(dst, s.amount)
	return appendInt(dst, s.last)
}
