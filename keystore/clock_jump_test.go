package keystore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
)

// TestClockJumpWindows: usage recorded while the clock ran 100 years ahead
// stops counting at most one window after the clock came back, whether the
// key stayed in memory or was read back after a restart, and a request
// rate limit used up then does not lock the key out either.
func TestClockJumpWindows(t *testing.T) {
	const jump = 100 * 365 * 24 * time.Hour
	for _, restart := range []bool{false, true} {
		name := "in-memory"
		if restart {
			name = "reopened"
		}
		t.Run(name, func(t *testing.T) {
			forEach(t, func(t *testing.T, e *env) {
				k, secret := e.createPolicy("jumper", keystore.Policy{
					Windows:           []keystore.Window{{Limit: 100, Window: time.Hour, Bucket: time.Minute}},
					RequestsPerMinute: 2,
				})
				e.clock.Advance(jump)
				for range 2 { // the request rate used up
					a := e.admit(secret, keystore.Request{})
					e.finish(a, 0)
				}
				e.record(k.ID, 150) // past the limit
				require.False(t, e.check(secret).Allowed)
				e.clock.Advance(-jump)
				if restart {
					e.reopen()
				}
				r := e.check(secret)
				require.False(t, r.Allowed, "the usage still counts, for one window at most")
				require.LessOrEqual(t, r.ResetAfter, time.Hour)
				e.clock.Advance(time.Hour)
				require.True(t, e.check(secret).Allowed, "usable one window after the clock came back")
				require.Equal(t, []int64{0}, e.used(k.ID))
				// The request rate, first asked now, is clamped now: a
				// wait of one minute at most.
				if _, err := e.ks.Admit(ctx, secret, keystore.Request{}); err != nil {
					var d *keystore.Denial
					require.ErrorAs(t, err, &d)
					require.LessOrEqual(t, d.RetryAfter, time.Minute)
					e.clock.Advance(time.Minute)
				}
				a := e.admit(secret, keystore.Request{Reserve: 10})
				e.finish(a, 10)
				require.Equal(t, []int64{10}, e.used(k.ID))
			})
		})
	}
}
