package keystore_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// TestPolicyWindows asserts that every window of a policy counts every
// token, that the one with the least room binds Check and Usage, and that
// Admit is refused by whichever window has no room.
func TestPolicyWindows(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("w", keystore.Policy{Windows: []keystore.Window{
			{Limit: 100, Window: time.Hour, Bucket: time.Minute},
			{Limit: 250, Window: 24 * time.Hour, Bucket: time.Hour},
		}})
		require.Equal(t, int64(100), k.TokenLimit, "the limit of the first window")

		e.record(k.ID, 90)
		_, err := e.ks.Admit(ctx, secret, keystore.Request{Reserve: 20})
		require.Equal(t, keystore.Denial{Reason: "window", Limit: "window 1h0m0s", RetryAfter: time.Hour}, copyDenial(denial(t, err)))

		e.clock.Set(t0.Add(time.Hour))
		require.Equal(t, []int64{0, 90}, e.used(k.ID))
		e.record(k.ID, 90)
		e.clock.Set(t0.Add(2 * time.Hour))
		e.record(k.ID, 60)
		require.Equal(t, []int64{60, 240}, e.used(k.ID))

		_, err = e.ks.Admit(ctx, secret, keystore.Request{Reserve: 20})
		require.Equal(t, keystore.Denial{Reason: "window", Limit: "window 24h0m0s", RetryAfter: 22 * time.Hour}, copyDenial(denial(t, err)))

		// The day binds: it has the least room. ResetAfter is the longest.
		require.Equal(t, strategies.Result{Allowed: true, Limit: 250, Remaining: 10, ResetAfter: 24 * time.Hour}, e.check(secret))
		u := e.usage(k.ID)
		require.Equal(t, keystore.Usage{
			Windows: []keystore.WindowUsage{
				{Window: time.Hour, Bucket: time.Minute, Used: 60, Limit: 100, Remaining: 40, ResetAfter: time.Hour, WindowEnd: t0.Add(3 * time.Hour)},
				{Window: 24 * time.Hour, Bucket: time.Hour, Used: 240, Limit: 250, Remaining: 10, ResetAfter: 24 * time.Hour, WindowEnd: t0.Add(24 * time.Hour)},
			},
			Used: 240, Limit: 250, Remaining: 10, ResetAfter: 24 * time.Hour, WindowEnd: t0.Add(24 * time.Hour),
			Binding: 1,
		}, u)

		e.finish(e.admit(secret, keystore.Request{Reserve: 10}), 10)
		require.Equal(t, strategies.Result{Allowed: true, Limit: 250, Remaining: 0, ResetAfter: 24 * time.Hour}, e.check(secret))
		res := e.record(k.ID, 1)
		require.False(t, res.Allowed)
		require.Equal(t, int64(250), res.Limit)
		require.Equal(t, 22*time.Hour, res.RetryAfter, "until the t0 bucket of the day expires")
	})
}

// TestPolicyRequestsPerMinute asserts that RequestsPerMinute admits that
// many requests in any rolling minute (1-second buckets), whatever their
// tokens, and that a refused request takes nothing from it.
func TestPolicyRequestsPerMinute(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("rpm", keystore.Policy{
			Windows:           []keystore.Window{{Limit: 1_000_000, Window: time.Hour}},
			RequestsPerMinute: 3,
		})
		for i := range 3 {
			e.finish(e.admit(secret, keystore.Request{Reserve: 10}), 0)
			require.Equal(t, int64(2-i), e.rateRemaining(k.ID, 3))
			e.clock.Advance(10 * time.Second)
		}
		// t0+30s: three requests in the last minute.
		for range 3 {
			_, err := e.ks.Admit(ctx, secret, keystore.Request{})
			require.ErrorIs(t, err, keystore.ErrLimited)
			require.Equal(t, keystore.Denial{Reason: "rate", Limit: "3 requests per minute", RetryAfter: 30 * time.Second}, copyDenial(denial(t, err)))
		}
		require.Equal(t, int64(0), e.rateRemaining(k.ID, 3))
		e.clock.Set(t0.Add(time.Minute - time.Nanosecond))
		_, err := e.ks.Admit(ctx, secret, keystore.Request{})
		require.Equal(t, time.Duration(1), denial(t, err).RetryAfter)
		e.clock.Set(t0.Add(time.Minute)) // the t0 request has gone
		e.finish(e.admit(secret, keystore.Request{}), 0)
		_, err = e.ks.Admit(ctx, secret, keystore.Request{})
		require.Equal(t, 10*time.Second, denial(t, err).RetryAfter)
		require.Equal(t, 0, e.usage(k.ID).InFlight)

		// Recorded usage is not requests.
		e.record(k.ID, 5)
		require.Equal(t, int64(0), e.rateRemaining(k.ID, 3))
		e.reopen()
		require.Equal(t, int64(0), e.rateRemaining(k.ID, 3), "the rate survives a reopen")
		_, err = e.ks.Admit(ctx, secret, keystore.Request{})
		require.ErrorIs(t, err, keystore.ErrLimited)
	})
}

// TestPolicyMaxConcurrent asserts that MaxConcurrent admissions may be in
// flight at once, that Finish frees a slot, and that the refusal's
// RetryAfter is when the oldest lease ends.
func TestPolicyMaxConcurrent(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("mc", keystore.Policy{
			Windows:       []keystore.Window{{Limit: 1000, Window: time.Hour}},
			MaxConcurrent: 2,
		})
		a := e.admit(secret, keystore.Request{Reserve: 1})
		e.clock.Advance(time.Minute)
		b := e.admit(secret, keystore.Request{Reserve: 1})
		e.clock.Advance(time.Minute)
		_, err := e.ks.Admit(ctx, secret, keystore.Request{})
		require.ErrorIs(t, err, keystore.ErrLimited)
		require.Equal(t, keystore.Denial{Reason: "concurrency", Limit: "2 requests in flight", RetryAfter: 8 * time.Minute}, copyDenial(denial(t, err)))
		require.Equal(t, 2, e.usage(k.ID).InFlight)

		e.finish(a, 1)
		c := e.admit(secret, keystore.Request{})
		_, err = e.ks.Admit(ctx, secret, keystore.Request{})
		require.Equal(t, 9*time.Minute, denial(t, err).RetryAfter, "b's lease ends first now")
		e.finish(b, 1)
		e.finish(c, 1)
		require.Equal(t, 0, e.usage(k.ID).InFlight)
		for range 2 {
			e.admit(secret, keystore.Request{})
		}
		require.Equal(t, 2, e.usage(k.ID).InFlight)
	})
}

// TestPolicyModels asserts that Models (path.Match globs) decide which
// models Admit lets a key ask for, that a request naming no model is not
// refused by them, and that a key without Models may ask for any.
func TestPolicyModels(t *testing.T) {
	models := []string{"gpt-4o", "claude-*", "gemini-?.?-pro"}
	cases := map[string]bool{
		"gpt-4o":          true,
		"gpt-4o-mini":     false,
		"GPT-4O":          false,
		"claude-3-opus":   true,
		"claude-":         true,
		"claude":          false,
		"gemini-1.5-pro":  true,
		"gemini-10.5-pro": false,
		"":                true,
	}
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("m", keystore.Policy{Windows: []keystore.Window{{Limit: 100, Window: time.Hour}}, Models: models})
		require.Equal(t, models, k.Policy.Models)
		_, anySecret := e.create("any", 100)
		for model, ok := range cases {
			a, err := e.ks.Admit(ctx, secret, keystore.Request{Model: model, Reserve: 1})
			if ok {
				require.NoError(t, err, model)
				e.finish(a, 1)
			} else {
				require.ErrorIs(t, err, keystore.ErrModel, model)
				require.Equal(t, keystore.Denial{Reason: "model", Limit: fmt.Sprintf("model %q", model), RetryAfter: -1}, copyDenial(denial(t, err)))
			}
			e.finish(e.admit(anySecret, keystore.Request{Model: model}), 0)
		}
		require.Equal(t, int64(5), e.usage(k.ID).Used, "refusals took nothing")
	})
}

// TestDefaultBucket asserts the Bucket of a Window given without one:
// Window/60 when that divides Window (API.md), else Window/60 rounded down
// to a whole unit and then to a divisor of Window.
func TestDefaultBucket(t *testing.T) {
	cases := []struct{ window, bucket time.Duration }{
		{5 * time.Hour, 5 * time.Minute},
		{time.Hour, time.Minute},
		{24 * time.Hour, 24 * time.Minute},
		{7 * time.Hour, 7 * time.Minute},
		{7 * 24 * time.Hour, 2*time.Hour + 48*time.Minute},
		{90 * time.Second, 1500 * time.Millisecond},
		{time.Minute, time.Second},
		{30 * time.Second, 500 * time.Millisecond},
		{59 * time.Minute, 59 * time.Second},
		// A sixtieth that does not divide the window.
		{61 * time.Second, time.Second},
		{7 * time.Second, 100 * time.Millisecond},
	}
	forEach(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			k, _ := e.createPolicy("b", keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: c.window}}})
			require.Equal(t, keystore.Window{Limit: 1, Window: c.window, Bucket: c.bucket}, k.Policy.Windows[0], "%v", c.window)
		}
	})
}

// badPolicies are invalid policies, each with the text its error must
// hold: the field it names.
var badPolicies = []struct {
	field  string
	policy keystore.Policy
}{
	{"Policy.Windows[0].Limit", keystore.Policy{Windows: []keystore.Window{{Window: time.Hour}}}},
	{"Policy.Windows[0].Limit", keystore.Policy{Windows: []keystore.Window{{Limit: -1, Window: time.Hour}}}},
	{"Policy.Windows[1].Limit", keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: time.Hour}, {Window: 24 * time.Hour}}}},
	{"Policy.Windows[0]", keystore.Policy{Windows: []keystore.Window{{Limit: 1}}}},
	{"Policy.Windows[0]", keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: -time.Hour}}}},
	{"Policy.Windows[0]", keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: strategies.MaxWindow + time.Hour}}}},
	{"Policy.Windows[0]", keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: time.Hour, Bucket: 7 * time.Minute}}}},
	{"Policy.Windows[0]", keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: time.Hour, Bucket: -time.Minute}}}},
	{"Policy.Windows[0]", keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: time.Hour, Bucket: 2 * time.Hour}}}},
	{"Policy.Windows[0]", keystore.Policy{Windows: []keystore.Window{{Limit: 1, Window: 24 * time.Hour, Bucket: time.Second}}}},
	{"Policy.Windows[1].Window: 1h0m0s, the length of window 0", keystore.Policy{Windows: []keystore.Window{
		{Limit: 1, Window: time.Hour}, {Limit: 2, Window: time.Hour, Bucket: 5 * time.Minute}}}},
	{"Policy.Windows: 17 token windows", keystore.Policy{Windows: manyWindows(keystore.MaxWindows + 1)}},
	{"Policy.RequestsPerMinute", keystore.Policy{Windows: manyWindows(1), RequestsPerMinute: -1}},
	{"Policy.MaxConcurrent", keystore.Policy{Windows: manyWindows(1), MaxConcurrent: -1}},
	{"Policy.Models[0]", keystore.Policy{Windows: manyWindows(1), Models: []string{""}}},
	{"Policy.Models[1]", keystore.Policy{Windows: manyWindows(1), Models: []string{"claude-*", "gpt-[4"}}},
	{"Policy.Models[0]", keystore.Policy{Windows: manyWindows(1), Models: []string{"a\nb"}}},
	{"Policy.Models[0]", keystore.Policy{Windows: manyWindows(1), Models: []string{strings.Repeat("m", keystore.MaxName+1)}}},
	{"Policy.Models: 257 models", keystore.Policy{Windows: manyWindows(1), Models: make([]string, keystore.MaxModels+1)}},
}

// manyWindows returns n valid windows of different lengths.
func manyWindows(n int) []keystore.Window {
	ws := make([]keystore.Window, n)
	for i := range ws {
		ws[i] = keystore.Window{Limit: 10, Window: time.Duration(i+1) * time.Hour}
	}
	return ws
}

// TestPolicyInvalid asserts that Create and Update refuse each invalid
// policy with ErrInvalid, naming the field, and change nothing; and that
// MaxWindows windows and MaxModels models are fine.
func TestPolicyInvalid(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.createPolicy("k", hourDay)
		e.record(k.ID, 7)
		before, usage, stored := e.get(k.ID), e.usage(k.ID), e.dump()
		for _, c := range badPolicies {
			_, s, err := e.ks.Create(ctx, keystore.Spec{Name: "bad", Policy: c.policy})
			require.ErrorIs(t, err, keystore.ErrInvalid, "%+v", c.policy)
			require.ErrorContains(t, err, c.field)
			require.Empty(t, s)

			got, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
				s.Name = "renamed"
				s.Policy = c.policy
				s.TokenLimit = 0 // or a policy without windows would be its shorthand
				return nil
			})
			require.ErrorIs(t, err, keystore.ErrInvalid, "%+v", c.policy)
			require.ErrorContains(t, err, c.field)
			require.Zero(t, got)
		}
		require.Equal(t, before, e.get(k.ID))
		require.Equal(t, usage, e.usage(k.ID))
		require.Equal(t, stored, e.dump())
		e.finish(e.admit(secret, keystore.Request{Model: "anything"}), 0)

		models := make([]string, keystore.MaxModels)
		for i := range models {
			models[i] = fmt.Sprintf("model-%d", i)
		}
		big, _ := e.createPolicy("big", keystore.Policy{Windows: manyWindows(keystore.MaxWindows), RequestsPerMinute: 1 << 40,
			MaxConcurrent: 1 << 20, Models: models})
		require.Len(t, big.Policy.Windows, keystore.MaxWindows)
		e.reopen()
		require.Equal(t, big, e.get(big.ID))
	})
}

// TestUpdatePolicyInUse asserts that Update changes a key's policy while
// it is in use: a window that keeps its length keeps its usage (its Limit
// and Bucket changed), a window of a new length starts empty, an
// admission in flight finishes in the windows of the new policy, the
// TokenLimit shorthand sets the first window's limit, and the changes
// survive a reopen.
func TestUpdatePolicyInUse(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, secret := e.create("u", 100)
		e.record(k.ID, 30)
		e.clock.Advance(2 * time.Minute)
		a := e.admit(secret, keystore.Request{Reserve: 20})

		pol := keystore.Policy{
			Windows:           []keystore.Window{{Limit: 200, Window: 5 * time.Hour, Bucket: time.Minute}, {Limit: 50, Window: time.Hour}},
			RequestsPerMinute: 10,
			Models:            []string{"m-*"},
		}
		got, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
			s.Policy = pol
			s.Model = "m-1"
			return nil
		})
		require.NoError(t, err)
		pol.Windows[1].Bucket = time.Minute
		require.Equal(t, pol, got.Policy)
		require.Equal(t, int64(200), got.TokenLimit)
		require.Equal(t, "m-1", got.Model)
		require.Equal(t, got, e.get(k.ID))
		require.Equal(t, []int64{50, 0}, e.used(k.ID), "the 5h window keeps its usage and the reservation; the hour starts empty")

		e.clock.Advance(time.Minute)
		u := e.finish(a, 25)
		require.Equal(t, []int64{55, 25}, []int64{u.Windows[0].Used, u.Windows[1].Used})
		require.Equal(t, int64(55), e.get(k.ID).LifetimeTokens)

		_, err = e.ks.Admit(ctx, secret, keystore.Request{Model: "gpt-4o"})
		require.ErrorIs(t, err, keystore.ErrModel)
		e.finish(e.admit(secret, keystore.Request{Model: "m-2"}), 0)
		require.Equal(t, int64(9), e.rateRemaining(k.ID, 10))

		// The TokenLimit shorthand.
		got, err = e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error { s.TokenLimit = 40; return nil })
		require.NoError(t, err)
		require.Equal(t, int64(40), got.TokenLimit)
		require.Equal(t, []keystore.Window{{Limit: 40, Window: 5 * time.Hour, Bucket: time.Minute}, pol.Windows[1]}, got.Policy.Windows)
		res := e.check(secret)
		require.False(t, res.Allowed)
		require.Equal(t, int64(40), res.Limit)

		// No windows and a TokenLimit: one usage window, whose length the
		// old first window had, so its usage stays.
		got, err = e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
			s.Policy.Windows = nil
			s.TokenLimit = 1000
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, keystore.Policy{Windows: []keystore.Window{usageWindow(1000)}, RequestsPerMinute: 10, Models: []string{"m-*"}}, got.Policy)
		require.Equal(t, []int64{55}, e.used(k.ID))

		e.reopen()
		require.Equal(t, got, e.get(k.ID))
		require.Equal(t, []int64{55}, e.used(k.ID))
		require.True(t, e.check(secret).Allowed)
	})
}

// TestUpdateErrors asserts that an error from Update's fn is returned and
// changes nothing, and that a changed Name or Model is checked like
// Create's.
func TestUpdateErrors(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		k, _ := e.createSpec(keystore.Spec{Name: "n", Model: "m", TokenLimit: 10})
		stored := e.dump()
		boom := errors.New("boom")
		got, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error {
			s.Name = "changed"
			s.TokenLimit = 99
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.Zero(t, got)
		for field, f := range map[string]func(*keystore.Spec){
			"Name":       func(s *keystore.Spec) { s.Name = "a\x00" },
			"Model":      func(s *keystore.Spec) { s.Model = strings.Repeat("x", keystore.MaxName+1) },
			"ExpiresAt":  func(s *keystore.Spec) { s.ExpiresAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) },
			"TokenLimit": func(s *keystore.Spec) { s.Policy.Windows = nil; s.TokenLimit = -1 },
		} {
			_, err := e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error { f(s); return nil })
			require.ErrorIs(t, err, keystore.ErrInvalid, field)
			require.ErrorContains(t, err, field)
		}
		require.Equal(t, k, e.get(k.ID))
		require.Equal(t, stored, e.dump())

		got, err = e.ks.Update(ctx, k.ID, func(s *keystore.Spec) error { s.Name, s.Model = "n2", ""; return nil })
		require.NoError(t, err)
		want := k
		want.Name, want.Model = "n2", ""
		require.Equal(t, want, got)
		e.reopen()
		require.Equal(t, want, e.get(k.ID))
	})
}

// TestPolicyCopied asserts that a key's policy is its own: changing the
// Spec's slices after Create changes nothing, and Update of one key leaves
// another key with an equal policy as it was.
func TestPolicyCopied(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		spec := keystore.Spec{Name: "a", Policy: keystore.Policy{
			Windows: []keystore.Window{{Limit: 10, Window: time.Hour}},
			Models:  []string{"m-*"},
		}}
		a, _ := e.createSpec(spec)
		spec.Name = "b"
		b, secretB := e.createSpec(spec)
		spec.Policy.Windows[0].Limit = 1
		spec.Policy.Models[0] = "other"
		require.Equal(t, a.Policy, e.get(a.ID).Policy)
		require.Equal(t, int64(10), e.get(a.ID).Policy.Windows[0].Limit)
		require.Equal(t, []string{"m-*"}, e.get(b.ID).Policy.Models)

		_, err := e.ks.Update(ctx, a.ID, func(s *keystore.Spec) error {
			s.Policy.Windows[0].Limit = 5
			s.Policy.Models[0] = "n-*"
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(5), e.get(a.ID).TokenLimit)
		require.Equal(t, b, e.get(b.ID), "an equal policy is shared, never changed in place")
		e.finish(e.admit(secretB, keystore.Request{Model: "m-1", Reserve: 10}), 10)
	})
}

// TestUsageBinding asserts which window Usage reports at the top level:
// the one most over its limit, else one over its limit, else the one with
// the least Remaining.
func TestUsageBinding(t *testing.T) {
	cases := []struct {
		name    string
		limits  [2]int64 // of an hour and a day
		record  int64
		binding int
	}{
		{"least remaining", [2]int64{10, 1000}, 5, 0},
		{"least remaining, second", [2]int64{1000, 10}, 5, 1},
		{"most over", [2]int64{100, 50}, 120, 1},
		{"most over, first", [2]int64{50, 100}, 120, 0},
		{"over beats at the limit", [2]int64{100, 105}, 105, 0},
	}
	forEach(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			k, _ := e.createPolicy(c.name, keystore.Policy{Windows: []keystore.Window{
				{Limit: c.limits[0], Window: time.Hour}, {Limit: c.limits[1], Window: 24 * time.Hour},
			}})
			e.record(k.ID, c.record)
			u := e.usage(k.ID)
			require.Equal(t, c.binding, u.Binding, c.name)
			b := u.Windows[c.binding]
			require.Equal(t, [4]int64{b.Used, b.Limit, b.Remaining, int64(b.ResetAfter)},
				[4]int64{u.Used, u.Limit, u.Remaining, int64(u.ResetAfter)}, c.name)
			require.Equal(t, b.WindowEnd, u.WindowEnd, c.name)
		}
	})
}
