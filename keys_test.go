package ratestore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/keystore"
)

// TestKeysPersist: the key store inside a DB keeps keys and usage across
// a restart, on both backends in both durability modes.
func TestKeysPersist(t *testing.T) {
	for _, e := range envs {
		t.Run(e.String(), func(t *testing.T) {
			s := e.open(t)
			keys := s.Keys()
			k, secret, err := keys.Create(ctx, keystore.Spec{Name: "team-a", TokenLimit: 1000})
			require.NoError(t, err)
			_, err = keys.RecordUsage(ctx, k.ID, 400)
			require.NoError(t, err)

			s.reopen()
			keys = s.Keys()
			got, res, err := keys.Check(ctx, secret)
			require.NoError(t, err)
			require.Equal(t, k.ID, got.ID)
			require.Equal(t, int64(400), got.LifetimeTokens)
			require.True(t, res.Allowed)
			require.Equal(t, int64(600), res.Remaining)

			// The usage window of Options: 5 hours by default.
			s.clock.Advance(5 * time.Hour)
			u, err := keys.Usage(ctx, k.ID)
			require.NoError(t, err)
			require.Zero(t, u.Used)
		})
	}
}

// TestUsageWindowOption: Options.UsageWindow and UsageBucket shape the key
// store's window, and a bad pair is refused by Open.
func TestUsageWindowOption(t *testing.T) {
	dir := t.TempDir()
	_, err := ratestore.Open(dir+"/bad.db", ratestore.Options{UsageWindow: time.Hour, UsageBucket: 7 * time.Minute})
	require.ErrorIs(t, err, ratestore.ErrInvalid)
	require.NoFileExists(t, dir+"/bad.db")

	c := newClock()
	db, err := ratestore.Open(dir+"/ok.db", ratestore.Options{Now: c.Now, UsageWindow: time.Hour, UsageBucket: time.Minute})
	require.NoError(t, err)
	defer db.Close()
	k, _, err := db.Keys().Create(ctx, keystore.Spec{Name: "a", TokenLimit: 10})
	require.NoError(t, err)
	_, err = db.Keys().RecordUsage(ctx, k.ID, 10)
	require.NoError(t, err)
	c.Advance(time.Hour)
	u, err := db.Keys().Usage(ctx, k.ID)
	require.NoError(t, err)
	require.Zero(t, u.Used, "a one-hour window has let go of the usage")
}
