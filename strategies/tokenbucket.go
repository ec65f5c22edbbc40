package strategies

// TokenBucket is the classic token bucket: a new key starts full with Burst
// tokens, tokens refill continuously at Rate per second up to Burst, and
// AllowN takes n tokens if at least n are there.
//
// The state is the number of tokens as of the last call that took some, and
// the instant of that call; the refill in between is computed when asked:
//
//	tokens(now) = min(Burst, tokens + Rate*(now - last))
//
// With Record the tokens may go negative: a debt that refills like any
// deficit, and denies every call until paid off. For a call of n:
//
//	Allowed    tokens(now) >= n
//	Remaining  floor(tokens) after the call, never negative
//	ResetAfter (Burst - tokens)/Rate, rounded up: until the bucket is full
//	RetryAfter (n - tokens)/Rate, rounded up; -1 when n > Burst
//
// Any positive finite Rate is accepted. Amounts are float64: integral
// token counts are exact up to 2^53; beyond that, and for a debt past 2^63
// tokens (where Record saturates), they are approximate. Durations beyond
// 292 years saturate at math.MaxInt64.
//
// When Burst is lowered under an existing state, tokens above the new
// Burst are dropped at the next call; when it is raised, the bucket refills
// to the new Burst from where it was.
type TokenBucket struct {
	Rate  float64 // tokens per second
	Burst int64   // capacity, and the tokens of a new key
}

// kindTokenBucket names token bucket states: "12|tokens|last".
var kindTokenBucket = newKind('1', '2', "token bucket", func() Decider { return &bucket{sign: 1} })

// tokenBucketState is a bucketState that only a token bucket accepts.
type tokenBucketState struct{ bucketState }

// Validate implements Strategy.
func (tb TokenBucket) Validate() error {
	if err := checkRate(kindTokenBucket, tb.Rate); err != nil {
		return err
	}
	return checkAtLeastOne(kindTokenBucket, "burst", tb.Burst)
}

// Prepare implements Strategy: the bucket's constants (see bucket). Its
// Decode reads "12|tokens|last" and the legacy
// "v1|tokens|last|capacity|rate" and "v2|tokens|last|".
func (tb TokenBucket) Prepare() Decider {
	if err := tb.Validate(); err != nil {
		return refused{err}
	}
	return newBucket(tb.Rate, float64(tb.Burst), 0, 1, tb.Burst)
}

// AppendEncode implements State: "12|tokens|last".
func (s *tokenBucketState) AppendEncode(dst []byte) []byte {
	return appendBucket(dst, kindTokenBucket, s.bucketState)
}

func (s *tokenBucketState) kind() *kind { return kindTokenBucket }

func (s *tokenBucketState) describe() Description {
	return describeAs(kindTokenBucket, map[string]any{"tokens": s.amount, "last": instant(s.last)})
}
