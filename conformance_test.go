package ratestore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/strategies"
)

// newClock is the tests' fake clock for Options.Now, at a fixed start.
func newClock() *fakeclock.Clock { return fakeclock.New(time.Date(2026, 1, 18, 9, 0, 0, 0, time.UTC)) }

// store is an open database of the matrix's embedded backends with its
// clock, reopenable at its path: for the engine's own features.
type store struct {
	t     *testing.T
	st    *backendtest.Store
	clock *fakeclock.Clock
	*ratestore.DB
}

// open opens a fresh database of b, on a new clock.
func open(t *testing.T, b backendtest.Backend) *store {
	st := b.Open(t, newClock())
	return &store{t: t, st: st, clock: st.Clock, DB: st.DB}
}

// reopen closes the DB (if open) and opens it again at the same path with
// the same clock: a restart.
func (s *store) reopen() {
	s.st.Reopen()
	s.DB = s.st.DB
}

// raw returns the stored bytes of key under name, after a Flush.
func (s *store) raw(name, key string) []byte {
	require.NoError(s.t, s.Flush(context.Background()))
	b, err := s.RawState(name, key)
	require.NoError(s.t, err)
	return b
}

// strategyCase is one configuration run through the suite. limit is how many
// unit calls a fresh key allows at one instant; header is the two-character
// id of its current encoding; legacy, if set, is an older encoding (with %d
// for the clock's Unix ns, or the instant of a GCRA TAT two calls ahead)
// that a limiter must read and rewrite, holding something in use.
type strategyCase struct {
	name   string
	s      strategies.Strategy
	limit  int64
	header string
	legacy string
}

var strategyCases = []strategyCase{
	{"token-bucket", strategies.TokenBucket{Rate: 10, Burst: 5}, 5, "12", "v2|3|%d|"},
	{"gcra", strategies.GCRA{Rate: 10, Burst: 5}, 5, "42", "v2|%d|"}, // TAT = now + 2T
	{"leaky-bucket", strategies.LeakyBucket{Rate: 10, Capacity: 5}, 5, "32", "v2|2|%d|"},
	{"fixed-window", strategies.FixedWindow{Quotas: []strategies.Quota{
		{Name: "second", Limit: 5, Window: time.Second},
		{Name: "minute", Limit: 50, Window: time.Minute},
	}}, 5, "23", "v2|2|%d|"},
	{"sliding-window", strategies.SlidingWindow{Limit: 5, Window: time.Second}, 5, "62", ""},
	{"rolling-window", strategies.RollingWindow{Limit: 5, Window: time.Second, Bucket: 100 * time.Millisecond}, 5, "72", ""},
	{"sliding-log", strategies.SlidingLog{Limit: 5, Window: time.Second}, 5, "81", ""},
	{"composite", strategies.Composite{
		Primary:   strategies.GCRA{Rate: 10, Burst: 5},
		Secondary: strategies.FixedWindow{Quotas: []strategies.Quota{{Name: "minute", Limit: 3, Window: time.Minute}}},
	}, 3, "51", "cmp1|v2|%d|$v2|1|%d|"}, // TAT = now + 2T; one call in the minute
	{"composite-rolling", strategies.Composite{
		Primary:   strategies.TokenBucket{Rate: 10, Burst: 5},
		Secondary: strategies.RollingWindow{Limit: 3, Window: time.Minute, Bucket: time.Second},
	}, 3, "51", ""},
}

// forEach runs f for every embedded backend and strategy case, each on a
// fresh DB: for the engine's own features (conform runs the suite every
// backend shares).
func forEach(t *testing.T, f func(t *testing.T, s *store, c strategyCase, l *ratestore.Limiter)) {
	eachCase(t, backendtest.Embedded(), strategyCases, func(t *testing.T, b backendtest.Backend, c strategyCase) {
		s := open(t, b)
		l, err := s.Limiter(c.name, c.s)
		require.NoError(t, err)
		f(t, s, c, l)
	})
}

// eachCase runs f as a subtest for every backend of bs and each of cases.
func eachCase(t *testing.T, bs []backendtest.Backend, cases []strategyCase, f func(t *testing.T, b backendtest.Backend, c strategyCase)) {
	backendtest.Run(t, bs, func(t *testing.T, b backendtest.Backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) { f(t, b, c) })
		}
	})
}

var ctx = context.Background()

// limiter is what the conformance suite calls: the limiter of the backend
// contract, ratestore.Limiter's and redisstore.Limiter's.
type limiter = backend.Limiter

// suite is one backend as the conformance suite drives it, on a fake
// clock.
type suite struct {
	clock  *fakeclock.Clock
	open   func(name string, s strategies.Strategy) (limiter, error)
	raw    func(name, key string) []byte // the stored encoding, every change written; nil for none
	putRaw func(name, key string, enc []byte)
	reopen func() // a restart: closed, and opened again on the same data
	// other opens a limiter on a second handle of the same data, standing
	// for another process; nil where one process holds the data (a file
	// lock).
	other func(name string, s strategies.Strategy) (limiter, error)
	// ttl: idle states are expired by the backend (Redis's TTLs) rather
	// than deleted on Close.
	ttl bool
}

func (s *suite) Limiter(name string, st strategies.Strategy) (limiter, error) {
	return s.open(name, st)
}

// openSuite is the suite on a fresh store of b.
func openSuite(t *testing.T, b backendtest.Backend) *suite {
	if b.IsRedis() {
		return openRedis(t)
	}
	st := open(t, b)
	return &suite{
		clock:  st.clock,
		open:   func(name string, s strategies.Strategy) (limiter, error) { return st.Handle(name, s) },
		raw:    st.raw,
		putRaw: func(name, key string, enc []byte) { require.NoError(t, st.PutRawState(name, key, enc)) },
		reopen: st.reopen,
	}
}

// openRedis is the suite on a fresh redis-server: its states are the keys
// of redisstore's package doc, "<unix ns>;<encoding>".
func openRedis(t *testing.T) *suite {
	st := backendtest.Redis.Open(t, newClock())
	second := st.Another()
	raw := redis.NewClient(&redis.Options{Addr: st.Server.Addr})
	t.Cleanup(func() { raw.Close() })
	rkey := func(name, key string) string { return redisstore.DefaultPrefix + "{" + key + "}" + name }
	return &suite{
		clock: st.Clock,
		open:  func(name string, s strategies.Strategy) (limiter, error) { return st.Handle(name, s) },
		raw: func(name, key string) []byte {
			v, err := raw.Get(ctx, rkey(name, key)).Result()
			if errors.Is(err, redis.Nil) {
				return nil
			}
			require.NoError(t, err)
			_, enc, ok := strings.Cut(v, ";")
			require.True(t, ok, "stored %q", v)
			return []byte(enc)
		},
		putRaw: func(name, key string, enc []byte) {
			v := fmt.Sprintf("%d;%s", st.Clock.Now().UnixNano(), enc)
			require.NoError(t, raw.Set(ctx, rkey(name, key), v, 0).Err())
		},
		reopen: st.Reopen,
		other:  second.Handle,
		ttl:    true,
	}
}

// conform runs f for every backend of the matrix and each of cases, each
// on a fresh store.
func conform(t *testing.T, cases []strategyCase, f func(t *testing.T, s *suite, c strategyCase, l limiter)) {
	eachCase(t, backendtest.All(), cases, func(t *testing.T, b backendtest.Backend, c strategyCase) {
		s := openSuite(t, b)
		l, err := s.Limiter(c.name, c.s)
		require.NoError(t, err)
		f(t, s, c, l)
	})
}

func TestExactlyLimitThenDenied(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		for i := range c.limit {
			r, err := l.Allow(ctx, "k")
			require.NoError(t, err)
			require.True(t, r.Allowed, "call %d", i+1)
			require.Equal(t, c.limit-i-1, r.Remaining, "call %d", i+1)
			require.Equal(t, c.limit, r.Limit)
			require.Zero(t, r.RetryAfter)
			require.Positive(t, r.ResetAfter)
		}
		r, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		require.False(t, r.Allowed)
		require.Zero(t, r.Remaining)
		require.Positive(t, r.RetryAfter)

		// Exactly RetryAfter later, the same call is allowed.
		s.clock.Advance(r.RetryAfter)
		r, err = l.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, r.Allowed)
	})
}

func TestDeniedAndPeekChangeNothing(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		// A fresh key: Peek and AllowN(0) are allowed and store nothing.
		r, err := l.Peek(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, ratestore.Result{Allowed: true, Limit: c.limit, Remaining: c.limit}, r)
		r, err = l.AllowN(ctx, "k", 0)
		require.NoError(t, err)
		require.True(t, r.Allowed)
		require.Equal(t, c.limit, r.Remaining)
		require.Nil(t, s.raw(c.name, "k"))

		_, err = l.AllowN(ctx, "k", c.limit-1)
		require.NoError(t, err)
		before := s.raw(c.name, "k")
		require.NotNil(t, before)
		peek, err := l.Peek(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, int64(1), peek.Remaining)

		r, err = l.AllowN(ctx, "k", 2) // does not fit: takes nothing
		require.NoError(t, err)
		require.False(t, r.Allowed)
		require.Equal(t, int64(1), r.Remaining)
		require.Positive(t, r.RetryAfter)

		r, err = l.AllowN(ctx, "k", c.limit+1) // can never fit
		require.NoError(t, err)
		require.False(t, r.Allowed)
		require.Equal(t, time.Duration(-1), r.RetryAfter)

		require.Equal(t, before, s.raw(c.name, "k"))
		again, err := l.Peek(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, peek, again)
	})
}

func TestRecordPastLimitThenRecovery(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		r, err := l.Record(ctx, "k", c.limit+3)
		require.NoError(t, err)
		require.False(t, r.Allowed, "past its limit after the Record")
		require.Zero(t, r.Remaining)

		p, err := l.Peek(ctx, "k")
		require.NoError(t, err)
		require.False(t, p.Allowed)
		require.Positive(t, p.RetryAfter)
		a, err := l.AllowN(ctx, "k", 0)
		require.NoError(t, err)
		require.False(t, a.Allowed, "AllowN(0) is denied while past the limit")

		s.clock.Advance(p.RetryAfter)
		p, err = l.Peek(ctx, "k")
		require.NoError(t, err)
		require.True(t, p.Allowed)

		// Once fully reset, the key behaves as a fresh one again.
		s.clock.Advance(p.ResetAfter)
		p, err = l.Peek(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, ratestore.Result{Allowed: true, Limit: c.limit, Remaining: c.limit}, p)
	})
}

func TestResetForgets(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		_, err := l.AllowN(ctx, "k", c.limit)
		require.NoError(t, err)
		require.NoError(t, l.Reset(ctx, "k"))
		require.Nil(t, s.raw(c.name, "k"))
		r, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		require.True(t, r.Allowed)
		require.Equal(t, c.limit-1, r.Remaining)
		// Reset of a key never seen is fine too.
		require.NoError(t, l.Reset(ctx, "never-seen"))
	})
}

// TestIdleStateIsDeleted: a state that time has brought back to its initial
// value is removed from disk rather than kept.
func TestIdleStateIsDeleted(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		r, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		require.NotNil(t, s.raw(c.name, "k"))
		s.clock.Advance(r.ResetAfter)
		p, err := l.Peek(ctx, "k")
		require.NoError(t, err)
		require.Zero(t, p.ResetAfter)
		require.Nil(t, s.raw(c.name, "k"))

		// And on Close, for keys nobody touched again; Redis expires them
		// by their TTL instead (see redisstore's TestStoredWithTTL).
		if s.ttl {
			return
		}
		_, err = l.Allow(ctx, "k2")
		require.NoError(t, err)
		s.clock.Advance(time.Hour)
		s.reopen()
		require.Nil(t, s.raw(c.name, "k2"))
	})
}

func TestRestartKeepsState(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		_, err := l.AllowN(ctx, "k", 2)
		require.NoError(t, err)
		want, err := l.Peek(ctx, "k")
		require.NoError(t, err)
		s.reopen() // Close flushes, in Async mode too
		l, err = s.Limiter(c.name, c.s)
		require.NoError(t, err)
		got, err := l.Peek(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, want, got)
		require.Equal(t, c.limit-2, got.Remaining)
	})
}

// TestClockBackwards: a step back within the strategy's longest wait
// (Decider.Horizon; the shortest here is 500ms) gives no refill and no
// penalty. A longer one is a clock jump, whose states are clamped instead:
// see TestClockJump.
func TestClockBackwards(t *testing.T) {
	const step = 200 * time.Millisecond
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		_, err := l.Allow(ctx, "k")
		require.NoError(t, err)
		s.clock.Advance(-step)
		r, err := l.Allow(ctx, "k") // no penalty: still allowed
		require.NoError(t, err)
		require.True(t, r.Allowed)
		require.Equal(t, c.limit-2, r.Remaining)
		s.clock.Advance(step)
		r, err = l.Peek(ctx, "k") // no refill was gained meanwhile
		require.NoError(t, err)
		require.Equal(t, c.limit-2, r.Remaining)
	})
}

// TestConcurrentExactlyLimit: 64 goroutines race for one key at one instant;
// exactly as many calls are allowed as a sequential run would allow. Where
// the backend can be opened twice (Redis), half of them call through a
// second handle, another process.
func TestConcurrentExactlyLimit(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, first limiter) {
		handles := []limiter{first}
		if s.other != nil {
			l, err := s.other(c.name, c.s)
			require.NoError(t, err)
			handles = append(handles, l)
		}
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for i := range 64 {
			l := handles[i%len(handles)]
			wg.Go(func() {
				for range 3 {
					r, err := l.Allow(ctx, "hot")
					if err != nil {
						t.Error(err)
						return
					}
					if r.Allowed {
						allowed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, c.limit, allowed.Load())
		s.reopen()
		l, err := s.Limiter(c.name, c.s)
		require.NoError(t, err)
		r, err := l.Peek(ctx, "hot")
		require.NoError(t, err)
		require.Zero(t, r.Remaining, "every allowed call is durable")
	})
}

func TestNamesIsolateState(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		other, err := s.Limiter(c.name+"-other", c.s)
		require.NoError(t, err)
		_, err = l.AllowN(ctx, "k", c.limit)
		require.NoError(t, err)
		r, err := other.Peek(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, c.limit, r.Remaining)
	})
}

func TestCorruptStateNamesKey(t *testing.T) {
	conform(t, strategyCases, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		for i, raw := range []string{"", "zz|1", c.header + "|NaN|1", c.header + "|", "v2|x|", c.header + "|1|2|3|4|5|6|7|8|9"} {
			key := fmt.Sprintf("bad-%d", i)
			s.putRaw(c.name, key, []byte(raw))
			for _, call := range []func() (ratestore.Result, error){
				func() (ratestore.Result, error) { return l.Allow(ctx, key) },
				func() (ratestore.Result, error) { return l.Peek(ctx, key) },
				func() (ratestore.Result, error) { return l.Record(ctx, key, 1) },
			} {
				_, err := call()
				require.ErrorIs(t, err, ratestore.ErrCorrupt, "stored %q", raw)
				require.Contains(t, err.Error(), key)
			}
			require.Equal(t, raw, string(s.raw(c.name, key)), "corrupt bytes are never overwritten silently")

			// Reset is the way out.
			require.NoError(t, l.Reset(ctx, key))
			r, err := l.Allow(ctx, key)
			require.NoError(t, err)
			require.True(t, r.Allowed)
		}
	})
}

func TestLegacyEncodingRewritten(t *testing.T) {
	var legacy []strategyCase // the sliding and rolling windows are new: they have no older encoding
	for _, c := range strategyCases {
		if c.legacy != "" {
			legacy = append(legacy, c)
		}
	}
	require.Len(t, legacy, 5)
	conform(t, legacy, func(t *testing.T, s *suite, c strategyCase, l limiter) {
		now := s.clock.Now().UnixNano()
		first := now // an instant for the buckets and windows
		if strings.HasPrefix(c.name, "gcra") || c.name == "composite" {
			first = now + int64(200*time.Millisecond) // a TAT: two calls of T = 100ms in use
		}
		raw := c.legacy
		if n := strings.Count(raw, "%d"); n == 1 {
			raw = fmt.Sprintf(raw, first)
		} else {
			raw = fmt.Sprintf(raw, first, now)
		}
		s.putRaw(c.name, "old", []byte(raw))
		p, err := l.Peek(ctx, "old")
		require.NoError(t, err)
		require.Less(t, p.Remaining, c.limit, "the legacy state counts")
		require.Equal(t, raw, string(s.raw(c.name, "old")), "reading rewrites nothing")

		r, err := l.Allow(ctx, "old")
		require.NoError(t, err)
		require.True(t, r.Allowed)
		require.Equal(t, p.Remaining-1, r.Remaining)
		got := string(s.raw(c.name, "old"))
		require.True(t, strings.HasPrefix(got, c.header+"|"), "rewritten in the current encoding: %q", got)
	})
}
