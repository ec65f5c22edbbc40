package keystore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// hourDay is a policy of 100 tokens per hour (1-minute buckets) and 1000
// per day (1-hour buckets).
var hourDay = keystore.Policy{Windows: []keystore.Window{
	{Limit: 100, Window: time.Hour, Bucket: time.Minute},
	{Limit: 1000, Window: 24 * time.Hour, Bucket: time.Hour},
}}

// TestAdmitFinish asserts that Admit holds its reservation in every
// window (counted as used by Usage and Check, with the admission in
// flight), and that Finish charges the real tokens in its place, more or
// less than reserved, adds them to LifetimeTokens, sets LastUsed and frees
// the slot.
func TestAdmitFinish(t *testing.T) {
	cases := []struct {
		name            string
		reserve, tokens int64
	}{
		{"more than reserved", 40, 55},
		{"less than reserved", 40, 10},
		{"exactly reserved", 40, 40},
		{"nothing used", 40, 0},
		{"no reservation", 0, 30},
		{"no reservation, nothing used", 0, 0},
	}
	windows := func(used int64, elapsed time.Duration, inFlight int) keystore.Usage {
		u := keystore.Usage{InFlight: inFlight}
		for _, w := range hourDay.Windows {
			wu := keystore.WindowUsage{Window: w.Window, Bucket: w.Bucket, Used: used, Limit: w.Limit, Remaining: w.Limit - used}
			if used > 0 {
				wu.ResetAfter, wu.WindowEnd = w.Window-elapsed, t0.Add(w.Window)
			}
			u.Windows = append(u.Windows, wu)
		}
		b := u.Windows[0] // the hour has the least left
		u.Used, u.Limit, u.Remaining, u.ResetAfter, u.WindowEnd = b.Used, b.Limit, b.Remaining, b.ResetAfter, b.WindowEnd
		return u
	}
	forEach(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e.t = t
				e.clock.Set(t0)
				k, secret := e.createPolicy(c.name, hourDay)
				e.clock.Advance(30 * time.Second)
				a := e.admit(secret, keystore.Request{Model: "any", Reserve: c.reserve})
				require.Equal(t, k, a.Key())
				require.Equal(t, windows(c.reserve, 30*time.Second, 1), e.usage(k.ID))
				res := e.check(secret)
				require.True(t, res.Allowed)
				require.Equal(t, 100-c.reserve, res.Remaining)

				e.clock.Advance(20 * time.Second)
				u := e.finish(a, c.tokens)
				require.Equal(t, windows(c.tokens, 50*time.Second, 0), u)
				require.Equal(t, u, e.usage(k.ID))
				got := e.get(k.ID)
				require.Equal(t, c.tokens, got.LifetimeTokens)
				require.Equal(t, t0.Add(50*time.Second), got.LastUsed)

				e.reopen()
				require.Equal(t, u, e.usage(k.ID))
			})
		}
	})
}

// TestAdmitAtLimit asserts that a key at exactly its limit is admitted
// with no reservation, as Check allows it, and refused one more token.
func TestAdmitAtLimit(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("full", 100)
		e.record(k.ID, 100)
		require.True(t, e.check(secret).Allowed)
		e.finish(e.admit(secret, keystore.Request{}), 0)
		_, err := e.ks.Admit(ctx, secret, keystore.Request{Reserve: 1})
		require.ErrorIs(t, err, keystore.ErrLimited)
		d := denial(t, err)
		require.Equal(t, keystore.Denial{Reason: "window", Limit: "window 5h0m0s", RetryAfter: 5 * time.Hour}, copyDenial(d))
		_, err = e.ks.Admit(ctx, secret, keystore.Request{Reserve: -1})
		require.ErrorIs(t, err, keystore.ErrInvalid)

		// Over the limit (a Record may take it there): refused even with
		// no reservation, until the excess has expired.
		e.clock.Advance(time.Hour)
		e.record(k.ID, 1)
		require.False(t, e.check(secret).Allowed)
		_, err = e.ks.Admit(ctx, secret, keystore.Request{})
		require.Equal(t, keystore.Denial{Reason: "window", Limit: "window 5h0m0s", RetryAfter: 4 * time.Hour}, copyDenial(denial(t, err)))
		e.clock.Advance(4 * time.Hour)
		e.finish(e.admit(secret, keystore.Request{Reserve: 99}), 0)
	})
}

// copyDenial returns the exported fields of d.
func copyDenial(d *keystore.Denial) keystore.Denial {
	return keystore.Denial{Reason: d.Reason, Limit: d.Limit, RetryAfter: d.RetryAfter}
}

// TestAdmitDenials asserts, for each limit, the error and the Denial of a
// refused Admit (sentinel, Reason, Limit, RetryAfter, -1 when waiting
// cannot help), the order the limits are checked in, and that a refusal
// changes nothing: no window, no request rate, no slot, no key.
func TestAdmitDenials(t *testing.T) {
	policy := keystore.Policy{
		Windows:           []keystore.Window{{Limit: 100, Window: time.Hour, Bucket: time.Minute}},
		RequestsPerMinute: 2,
		MaxConcurrent:     1,
		Models:            []string{"claude-*"},
	}
	type setup func(e *env, id, secret string) keystore.Request
	fillWindow := func(e *env, id string) { e.record(id, 90) }
	useRate := func(e *env, secret string) {
		e.finish(e.admit(secret, keystore.Request{}), 0)
		e.clock.Advance(10 * time.Second)
		e.finish(e.admit(secret, keystore.Request{}), 0)
		e.clock.Advance(10 * time.Second)
	}
	holdSlot := func(e *env, secret string) { e.admit(secret, keystore.Request{Reserve: 5}) }
	cases := []struct {
		name     string
		expires  time.Time
		setup    setup
		sentinel error
		want     keystore.Denial
	}{
		{"disabled", time.Time{}, func(e *env, id, _ string) keystore.Request {
			require.NoError(e.t, e.ks.Disable(ctx, id))
			return keystore.Request{Model: "gpt-4o", Reserve: 500}
		}, keystore.ErrDisabled, keystore.Denial{Reason: "disabled", RetryAfter: -1}},
		{"expired", t0.Add(time.Hour), func(e *env, _, _ string) keystore.Request {
			e.clock.Advance(time.Hour)
			return keystore.Request{Model: "gpt-4o"}
		}, keystore.ErrExpired, keystore.Denial{Reason: "expired", Limit: "expired at 2026-01-18T10:00:00Z", RetryAfter: -1}},
		{"model", time.Time{}, func(e *env, _, secret string) keystore.Request {
			holdSlot(e, secret)
			return keystore.Request{Model: "gpt-4o"}
		}, keystore.ErrModel, keystore.Denial{Reason: "model", Limit: `model "gpt-4o"`, RetryAfter: -1}},
		{"concurrency before window and rate", time.Time{}, func(e *env, id, secret string) keystore.Request {
			fillWindow(e, id)
			e.finish(e.admit(secret, keystore.Request{}), 0)
			e.clock.Advance(10 * time.Second)
			holdSlot(e, secret) // the rate's second request, held
			e.clock.Advance(20 * time.Second)
			return keystore.Request{Model: "claude-3", Reserve: 50}
		}, keystore.ErrLimited, keystore.Denial{Reason: "concurrency", Limit: "1 requests in flight", RetryAfter: 9*time.Minute + 40*time.Second}},
		{"window before rate", time.Time{}, func(e *env, id, secret string) keystore.Request {
			fillWindow(e, id)
			useRate(e, secret)
			return keystore.Request{Reserve: 20}
		}, keystore.ErrLimited, keystore.Denial{Reason: "window", Limit: "window 1h0m0s", RetryAfter: time.Hour - 20*time.Second}},
		{"window", time.Time{}, func(e *env, id, _ string) keystore.Request {
			fillWindow(e, id)
			e.clock.Advance(10 * time.Minute)
			return keystore.Request{Reserve: 20}
		}, keystore.ErrLimited, keystore.Denial{Reason: "window", Limit: "window 1h0m0s", RetryAfter: 50 * time.Minute}},
		{"window never", time.Time{}, func(*env, string, string) keystore.Request {
			return keystore.Request{Reserve: 101}
		}, keystore.ErrLimited, keystore.Denial{Reason: "window", Limit: "window 1h0m0s", RetryAfter: -1}},
		{"rate", time.Time{}, func(e *env, _, secret string) keystore.Request {
			useRate(e, secret)
			return keystore.Request{Reserve: 100}
		}, keystore.ErrLimited, keystore.Denial{Reason: "rate", Limit: "2 requests per minute", RetryAfter: 40 * time.Second}},
	}
	forEach(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e.t = t
				e.clock.Set(t0)
				k, secret := e.createSpec(keystore.Spec{Name: c.name, Policy: policy, ExpiresAt: c.expires})
				req := c.setup(e, k.ID, secret)
				key, usage, rate := e.get(k.ID), e.usage(k.ID), e.rateRemaining(k.ID, 2)
				a, err := e.ks.Admit(ctx, secret, req)
				require.Nil(t, a)
				require.ErrorIs(t, err, c.sentinel)
				d := denial(t, err)
				require.Equal(t, c.want, copyDenial(d))
				require.ErrorContains(t, err, k.ID)
				require.NotContains(t, err.Error(), secret)
				switch {
				case c.want.RetryAfter > 0:
					require.ErrorContains(t, err, "retry after "+c.want.RetryAfter.String())
				case c.sentinel == keystore.ErrLimited:
					require.ErrorContains(t, err, "can never fit")
				}
				require.Equal(t, key, e.get(k.ID), "a refusal changes nothing")
				require.Equal(t, usage, e.usage(k.ID), "a refusal changes nothing")
				require.Equal(t, rate, e.rateRemaining(k.ID, 2), "a refusal changes nothing")
			})
		}
		a, err := e.ks.Admit(ctx, "rsk_unknown", keystore.Request{})
		require.Nil(t, a)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		require.Equal(t, keystore.Denial{Reason: "unknown", RetryAfter: -1}, copyDenial(denial(t, err)))
	})
}

// TestAdmitSecondWindowRefuses asserts that the Denial names the window
// that refused when it is not the first one, with the RetryAfter until it
// has room.
func TestAdmitSecondWindowRefuses(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("two", hourDay)
		for range 10 {
			e.record(k.ID, 95)
			e.clock.Advance(time.Hour)
		}
		// t0+10h: the hour is empty, the day holds 950 of 1000.
		require.Equal(t, []int64{0, 950}, e.used(k.ID))
		_, err := e.ks.Admit(ctx, secret, keystore.Request{Reserve: 60})
		require.ErrorIs(t, err, keystore.ErrLimited)
		// 60 fits in the day once the t0 bucket has gone.
		require.Equal(t, keystore.Denial{Reason: "window", Limit: "window 24h0m0s", RetryAfter: 14 * time.Hour}, copyDenial(denial(t, err)))
		require.Equal(t, []int64{0, 950}, e.used(k.ID))
		e.finish(e.admit(secret, keystore.Request{Reserve: 50}), 50)
		require.Equal(t, []int64{50, 1000}, e.used(k.ID))
	})
}

// TestAdmitNeverFitsNamesWindow asserts that when a reservation can never
// fit one window (Reserve over its limit) while another window refuses it
// only for now, the Denial names the window it can never fit, whose
// RetryAfter -1 it reports: not the other one, which would admit it later.
func TestAdmitNeverFitsNamesWindow(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("two", hourDay)
		for range 10 {
			e.record(k.ID, 95)
			e.clock.Advance(time.Hour)
		}
		require.Equal(t, []int64{0, 950}, e.used(k.ID))
		_, err := e.ks.Admit(ctx, secret, keystore.Request{Reserve: 101})
		require.ErrorIs(t, err, keystore.ErrLimited)
		require.Equal(t, keystore.Denial{Reason: "window", Limit: "window 1h0m0s", RetryAfter: -1}, copyDenial(denial(t, err)))
	})
}

// TestReservationsCounted asserts that the reservations of admissions in
// flight count as used for Check, Usage and the next Admit.
func TestReservationsCounted(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("r", keystore.Policy{Windows: []keystore.Window{{Limit: 100, Window: time.Hour, Bucket: time.Minute}}})
		a := e.admit(secret, keystore.Request{Reserve: 70})
		require.Equal(t, strategies.Result{Allowed: true, Limit: 100, Remaining: 30, ResetAfter: time.Hour}, e.check(secret))
		u := e.usage(k.ID)
		require.Equal(t, int64(70), u.Used)
		require.Equal(t, 1, u.InFlight)

		_, err := e.ks.Admit(ctx, secret, keystore.Request{Reserve: 31})
		require.Equal(t, keystore.Denial{Reason: "window", Limit: "window 1h0m0s", RetryAfter: time.Hour}, copyDenial(denial(t, err)))
		b := e.admit(secret, keystore.Request{Reserve: 30})
		require.Equal(t, strategies.Result{Allowed: true, Limit: 100, Remaining: 0, ResetAfter: time.Hour}, e.check(secret))
		c := e.admit(secret, keystore.Request{}) // at exactly the limit
		require.Equal(t, 3, e.usage(k.ID).InFlight)

		e.finish(a, 0)
		e.finish(b, 0)
		u = e.finish(c, 0)
		require.Equal(t, int64(0), u.Used)
		require.Equal(t, 0, u.InFlight)
		require.Equal(t, strategies.Result{Allowed: true, Limit: 100, Remaining: 100}, e.check(secret))
	})
}

// TestFinishInReservationBucket asserts that Finish charges the real
// tokens in the bucket the reservation went to, however much later it
// comes: they expire when the reservation would have, and other usage is
// left alone.
func TestFinishInReservationBucket(t *testing.T) {
	// A lease longer than the test: the Finishes are not late.
	forEachOpts(t, keystore.Options{LeaseTTL: 2 * time.Hour}, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("b", keystore.Policy{Windows: []keystore.Window{{Limit: 1000, Window: time.Hour, Bucket: 5 * time.Minute}}})
		e.clock.Advance(time.Minute)
		a := e.admit(secret, keystore.Request{Reserve: 40}) // bucket t0
		b := e.admit(secret, keystore.Request{Reserve: 30}) // bucket t0
		e.clock.Set(t0.Add(12 * time.Minute))
		e.record(k.ID, 5) // bucket t0+10m
		e.finish(a, 60)   // more than reserved
		u := e.finish(b, 10)
		require.Equal(t, int64(75), u.Used)
		require.Equal(t, t0.Add(time.Hour), u.WindowEnd, "the oldest usage is the reservations', in bucket t0")
		require.Equal(t, 58*time.Minute, u.ResetAfter)

		e.clock.Set(t0.Add(time.Hour - 1))
		require.Equal(t, int64(75), e.usage(k.ID).Used)
		e.clock.Set(t0.Add(time.Hour))
		u = e.usage(k.ID)
		require.Equal(t, int64(5), u.Used, "the tokens charged by Finish expire with the reservation's bucket")
		require.Equal(t, t0.Add(70*time.Minute), u.WindowEnd)
		e.clock.Set(t0.Add(70 * time.Minute))
		require.Equal(t, int64(0), e.usage(k.ID).Used)
	})
}

// TestFinishNeverBelowZero asserts that a Finish that gives back a
// reservation whose bucket has already expired gives back nothing: the
// usage never goes below zero and other buckets are left alone.
func TestFinishNeverBelowZero(t *testing.T) {
	// A lease longer than the window: the Finishes give back what they can.
	forEachOpts(t, keystore.Options{LeaseTTL: 2 * time.Hour}, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("z", keystore.Policy{Windows: []keystore.Window{{Limit: 100, Window: time.Hour, Bucket: time.Minute}}})
		a := e.admit(secret, keystore.Request{Reserve: 40})
		b := e.admit(secret, keystore.Request{Reserve: 40})
		e.clock.Advance(30 * time.Minute)
		e.record(k.ID, 5)
		e.clock.Advance(31 * time.Minute) // the reservations' bucket has expired
		require.Equal(t, int64(5), e.usage(k.ID).Used)
		u := e.finish(a, 0)
		require.Equal(t, int64(5), u.Used)
		u = e.finish(b, 10)
		require.Equal(t, int64(5), u.Used)
		for _, w := range u.Windows {
			require.GreaterOrEqual(t, w.Used, int64(0))
		}
		require.Equal(t, int64(15), e.get(k.ID).LifetimeTokens)
	})
}

// TestFinishAfterBucketChange asserts that Finish gives back an unused
// reservation after Update changed the Bucket of its window (same length):
// the reservation moved with the window's usage to the new buckets, and
// what counts after Finish is the real usage, as Update promises that
// admissions in flight finish in the windows they reserved in.
func TestFinishAfterBucketChange(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("c", keystore.Policy{Windows: []keystore.Window{{Limit: 100, Window: time.Hour, Bucket: time.Minute}}})
		e.clock.Advance(90 * time.Second)
		a := e.admit(secret, keystore.Request{Reserve: 40}) // bucket t0+1m
		_, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
			s.Policy.Windows[0].Bucket = 5 * time.Minute
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(40), e.usage(k.ID).Used, "the reservation still counts")
		u := e.finish(a, 0)
		require.Equal(t, int64(0), u.Used, "an unused reservation is given back")
	})
}

// TestFinishAfterTwoBucketChanges asserts that Finish gives back an unused
// reservation after Update changed the Bucket of its window twice, back to
// the one it was reserved under, with a write in between that moved the
// window's usage to the intermediate buckets.
func TestFinishAfterTwoBucketChanges(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("c", keystore.Policy{Windows: []keystore.Window{{Limit: 100, Window: time.Hour, Bucket: time.Minute}}})
		e.clock.Advance(90 * time.Second)
		a := e.admit(secret, keystore.Request{Reserve: 40}) // bucket t0+1m
		setBucket := func(b time.Duration) {
			_, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
				s.Policy.Windows[0].Bucket = b
				return nil
			})
			require.NoError(t, err)
		}
		setBucket(5 * time.Minute)
		e.record(k.ID, 1) // a write under the 5-minute buckets
		setBucket(time.Minute)
		require.Equal(t, int64(41), e.usage(k.ID).Used, "the reservation still counts")
		u := e.finish(a, 0)
		require.Equal(t, int64(1), u.Used, "an unused reservation is given back")
	})
}

// TestFinishTwice asserts that a second Finish is an error matching
// ErrInvalid and changes nothing, and that a Finish refused for negative
// tokens leaves the admission to finish.
func TestFinishTwice(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("f", 100)
		a := e.admit(secret, keystore.Request{Reserve: 10})
		_, err := a.Finish(ctx, -1)
		require.ErrorIs(t, err, keystore.ErrInvalid)
		require.Equal(t, 1, e.usage(k.ID).InFlight)
		e.finish(a, 7)
		key, usage := e.get(k.ID), e.usage(k.ID)
		for _, tokens := range []int64{7, 0, 50} {
			_, err = a.Finish(ctx, tokens)
			require.ErrorIs(t, err, keystore.ErrInvalid)
		}
		require.Equal(t, key, e.get(k.ID))
		require.Equal(t, usage, e.usage(k.ID))
		require.Equal(t, int64(7), usage.Used)
	})
}

// TestFinishAfterDelete asserts that an admission of a key deleted while
// it was in flight finishes with ErrNotFound, once.
func TestFinishAfterDelete(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("d", 100)
		a := e.admit(secret, keystore.Request{Reserve: 10})
		require.NoError(t, e.ks.Delete(ctx, k.ID))
		_, err := a.Finish(ctx, 5)
		require.ErrorIs(t, err, keystore.ErrNotFound)
		_, err = a.Finish(ctx, 5)
		require.ErrorIs(t, err, keystore.ErrInvalid)
	})
}

// TestAdmissionKey asserts that Admission.Key is the key as it was when
// the request was admitted.
func TestAdmissionKey(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("before", 100)
		a := e.admit(secret, keystore.Request{})
		_, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error { s.Name = "after"; return nil })
		require.NoError(t, err)
		require.Equal(t, k, a.Key())
		e.finish(a, 1)
		require.Equal(t, "before", a.Key().Name)
		require.Equal(t, "after", e.get(k.ID).Name)
	})
}

// TestLeaseTTL asserts that an admission not finished within
// Options.LeaseTTL frees its concurrency slot (so a new Admit is admitted
// at MaxConcurrent) and keeps its reservation charged, and that its late
// Finish charges only the tokens beyond the reservation and frees no other
// admission's slot.
func TestLeaseTTL(t *testing.T) {
	forEachOpts(t, keystore.Options{LeaseTTL: time.Minute}, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("l", keystore.Policy{
			Windows:       []keystore.Window{{Limit: 1000, Window: time.Hour, Bucket: time.Minute}},
			MaxConcurrent: 1,
		})
		a := e.admit(secret, keystore.Request{Reserve: 30})
		_, err := e.ks.Admit(ctx, secret, keystore.Request{})
		require.Equal(t, keystore.Denial{Reason: "concurrency", Limit: "1 requests in flight", RetryAfter: time.Minute}, copyDenial(denial(t, err)))
		e.clock.Advance(30 * time.Second)
		_, err = e.ks.Admit(ctx, secret, keystore.Request{})
		require.Equal(t, 30*time.Second, denial(t, err).RetryAfter)
		require.Equal(t, 1, e.usage(k.ID).InFlight)

		e.clock.Advance(30 * time.Second) // a's lease has ended
		u := e.usage(k.ID)
		require.Equal(t, 0, u.InFlight)
		require.Equal(t, int64(30), u.Used, "the reservation stays charged")
		b := e.admit(secret, keystore.Request{Reserve: 10})
		require.Equal(t, 1, e.usage(k.ID).InFlight)

		u = e.finish(a, 50) // 20 more than reserved
		require.Equal(t, int64(60), u.Used)
		require.Equal(t, 1, u.InFlight, "b still holds its slot")
		_, err = e.ks.Admit(ctx, secret, keystore.Request{})
		require.Equal(t, "concurrency", denial(t, err).Reason)

		u = e.finish(b, 10)
		require.Equal(t, int64(60), u.Used)
		require.Equal(t, 0, u.InFlight)

		// A late Finish under the reservation gives nothing back.
		c := e.admit(secret, keystore.Request{Reserve: 30})
		e.clock.Advance(2 * time.Minute)
		u = e.finish(c, 5)
		require.Equal(t, int64(90), u.Used)
		_, err = c.Finish(ctx, 5)
		require.ErrorIs(t, err, keystore.ErrInvalid)
		require.Equal(t, int64(50+10+5), e.get(k.ID).LifetimeTokens)
		e.finish(e.admit(secret, keystore.Request{}), 0)
	})
}
