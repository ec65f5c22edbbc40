package keystore_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
)

// TestConcurrentAdmit runs Admit and Finish from 256 goroutines at once on
// one key, the clock frozen, and asserts that exactly as many are admitted
// as the policy allows, that every refusal names the limit that binds, and
// that after Finish every window holds exactly the tokens charged.
func TestConcurrentAdmit(t *testing.T) {
	const goroutines = 256
	cases := []struct {
		name    string
		policy  keystore.Policy
		reserve int64
		hold    bool // hold every admission until every goroutine has tried
		want    int
		reason  string
	}{
		{"rate", keystore.Policy{Windows: []keystore.Window{{Limit: 1_000_000, Window: time.Hour}}, RequestsPerMinute: 100},
			0, false, 100, "rate"},
		{"window", keystore.Policy{Windows: []keystore.Window{{Limit: 10_000, Window: time.Hour}}},
			100, true, 100, "window"},
		{"concurrency", keystore.Policy{Windows: []keystore.Window{{Limit: 1_000_000, Window: time.Hour}}, MaxConcurrent: 10},
			1, true, 10, "concurrency"},
		{"all", keystore.Policy{
			Windows:           []keystore.Window{{Limit: 2000, Window: time.Hour}, {Limit: 5000, Window: 24 * time.Hour}},
			RequestsPerMinute: 50,
			MaxConcurrent:     30,
		}, 100, true, 20, "window"},
	}
	forEach(t, func(t *testing.T, e *env) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				e.t = t
				k, secret := e.createPolicy(c.name, c.policy)
				var (
					admitted, charged atomic.Int64
					tried             sync.WaitGroup
					mu                sync.Mutex
					reasons           = map[string]int{}
				)
				tried.Add(goroutines)
				err := parallel(goroutines, func(i int) error {
					a, err := e.ks.Admit(ctx, secret, keystore.Request{Model: "m", Reserve: c.reserve})
					tried.Done()
					if c.hold {
						tried.Wait()
					}
					if err != nil {
						var d *keystore.Denial
						if !errors.As(err, &d) || !errors.Is(err, keystore.ErrLimited) {
							return err
						}
						mu.Lock()
						reasons[d.Reason]++
						mu.Unlock()
						return nil
					}
					admitted.Add(1)
					tokens := int64(i%150 + 1) // more and less than reserved
					charged.Add(tokens)
					_, err = a.Finish(ctx, tokens)
					return err
				})
				require.NoError(t, err)
				require.Equal(t, int64(c.want), admitted.Load())
				require.Equal(t, map[string]int{c.reason: goroutines - c.want}, reasons)
				u := e.usage(k.ID)
				require.Equal(t, 0, u.InFlight)
				for _, w := range u.Windows {
					require.Equal(t, charged.Load(), w.Used, "window %v", w.Window)
				}
				require.Equal(t, charged.Load(), e.get(k.ID).LifetimeTokens)
				if c.policy.RequestsPerMinute > 0 {
					require.Equal(t, c.policy.RequestsPerMinute-int64(c.want), e.rateRemaining(k.ID, c.policy.RequestsPerMinute))
				}
			})
		}
	})
}

// TestConcurrentKeys runs Admit, Finish, RecordUsage, Check, Usage and
// Update from many goroutines on several keys at once, and asserts that
// every token lands in its own key.
func TestConcurrentKeys(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		const keys, goroutines = 4, 128
		ids, secrets := make([]string, keys), make([]string, keys)
		for i := range keys {
			k, s := e.createPolicy("k", hourDay)
			ids[i], secrets[i] = k.ID, s
		}
		hourDayBig := hourDay
		hourDayBig.Windows = []keystore.Window{
			{Limit: 1 << 40, Window: time.Hour, Bucket: time.Minute},
			{Limit: 1 << 41, Window: 24 * time.Hour, Bucket: time.Hour},
		}
		for _, id := range ids {
			_, err := e.ks.Update(ctx, id, func(s *keystore.Spec) error { s.Policy = hourDayBig; return nil })
			require.NoError(t, err)
		}
		var want [keys]atomic.Int64
		require.NoError(t, parallel(goroutines, func(i int) error {
			k := i % keys
			switch i % 5 {
			case 0:
				a, err := e.ks.Admit(ctx, secrets[k], keystore.Request{Reserve: 50})
				if err != nil {
					return err
				}
				want[k].Add(int64(i))
				_, err = a.Finish(ctx, int64(i))
				return err
			case 1:
				want[k].Add(3)
				_, err := e.ks.RecordUsage(ctx, ids[k], 3)
				return err
			case 2:
				_, _, err := e.ks.Check(ctx, secrets[k])
				return err
			case 3:
				_, err := e.ks.Usage(ctx, ids[k])
				return err
			default:
				_, err := e.ks.Update(ctx, ids[k], func(s *keystore.Spec) error { s.Name = "renamed"; return nil })
				return err
			}
		}))
		for k := range keys {
			require.Equal(t, []int64{want[k].Load(), want[k].Load()}, e.used(ids[k]))
			require.Equal(t, want[k].Load(), e.get(ids[k]).LifetimeTokens)
		}
	})
}

// TestAuthenticateWhileDeleting asserts that authenticating unknown
// secrets, which looks the secret up in the stored index when some key's
// record is corrupt, is safe while other keys are deleted: no data race,
// and every answer is ErrNotFound.
func TestAuthenticateWhileDeleting(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		bad, _ := e.create("corrupt", 10)
		const keys = 32
		ids := make([]string, keys)
		for i := range ids {
			k, _ := e.create("victim", 10)
			ids[i] = k.ID
		}
		e.rawPut("k/"+bad.ID, []byte("not a record"))
		e.reopen()
		_, err := e.ks.Get(ctx, bad.ID)
		require.ErrorIs(t, err, keystore.ErrCorrupt)

		require.NoError(t, parallel(2*keys, func(i int) error {
			if i%2 == 0 {
				return e.ks.Delete(ctx, ids[i/2])
			}
			for range 20 {
				if _, err := e.ks.Authenticate(ctx, "rsk_nobody"); !errors.Is(err, keystore.ErrNotFound) {
					return err
				}
			}
			return nil
		}))
	})
}
