package strategies

// LeakyBucket is a bucket that holds up to Capacity and leaks continuously
// at Rate per second; AllowN pours n in if it fits: it is the token bucket
// seen from the other side, counting what is in use instead of what is
// left, and a new key starts empty.
//
// The state is the level as of the last call that poured some, and the
// instant of that call:
//
//	level(now) = max(0, level - Rate*(now - last))
//
// With Record the level may rise above Capacity; every call is then denied
// until it has leaked back. For a call of n:
//
//	Allowed    level(now) + n <= Capacity
//	Remaining  floor(Capacity - level) after the call, never negative
//	ResetAfter level/Rate, rounded up: until the bucket is empty
//	RetryAfter (level + n - Capacity)/Rate, rounded up; -1 when n > Capacity
//
// Rates, precision and saturation are as for TokenBucket. When Capacity is
// lowered under an existing state, the level is kept: a level above the new
// Capacity leaks away like a Record's overflow.
type LeakyBucket struct {
	Rate     float64 // units leaked per second
	Capacity int64
}

// kindLeakyBucket names leaky bucket states: "32|level|last".
var kindLeakyBucket = newKind('3', '2', "leaky bucket", func() Decider { return &bucket{sign: -1} })

// leakyBucketState is a bucketState that only a leaky bucket accepts.
type leakyBucketState struct{ bucketState }

// Validate implements Strategy.
func (lb LeakyBucket) Validate() error {
	if err := checkRate(kindLeakyBucket, lb.Rate); err != nil {
		return err
	}
	return checkAtLeastOne(kindLeakyBucket, "capacity", lb.Capacity)
}

// Prepare implements Strategy: the bucket's constants (see bucket). Its
// Decode reads "32|level|last" and the legacy "v1|level|last|capacity|rate"
// and "v2|level|last|".
func (lb LeakyBucket) Prepare() Decider {
	if err := lb.Validate(); err != nil {
		return refused{err}
	}
	return newBucket(lb.Rate, 0, float64(lb.Capacity), -1, lb.Capacity)
}

// AppendEncode implements State: "32|level|last".
func (s *leakyBucketState) AppendEncode(dst []byte) []byte {
	return appendBucket(dst, kindLeakyBucket, s.bucketState)
}

func (s *leakyBucketState) kind() *kind { return kindLeakyBucket }

func (s *leakyBucketState) describe() Description {
	return describeAs(kindLeakyBucket, map[string]any{"level": s.amount, "last": instant(s.last)})
}
