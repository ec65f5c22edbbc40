package keystore_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// Record flags, as both record versions store them.
const (
	flagDisabled = 1 << iota
	flagExpires
	flagCreated
	flagLastUsed
	flagLegacy
)

// v1Key is a key as the version 1 key store stored it.
type v1Key struct {
	id, secret    string
	flags         byte
	limit         int64
	lifetime      int64
	times         []int64 // ExpiresAt, CreatedAt, LastUsed in Unix ns, those the flags say
	name, model   string
	window        []byte // a strategies.RollingWindow state's encoding; empty: nothing in use
	legacyWindows [][2]int64
}

// encodeV1 writes k's record as the version 1 record.go did: version 1,
// flags, the 32-byte hash, uvarint token limit, uvarint lifetime, a zigzag
// varint for each instant set, then length-prefixed name, model and
// window.
func (k v1Key) encodeV1() []byte {
	h := sha256.Sum256([]byte(k.secret))
	b := append([]byte{1, k.flags}, h[:]...)
	b = binary.AppendUvarint(b, uint64(k.limit))
	b = binary.AppendUvarint(b, uint64(k.lifetime))
	for _, t := range k.times {
		b = binary.AppendVarint(b, t)
	}
	for _, s := range []string{k.name, k.model, string(k.window)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// encodeV3 is the record the key store must rewrite k as: version 3, the
// same flags, hash, lifetime and instants, name and model, then the
// length-prefixed policy (one window of the usage window with k's limit)
// and what it spent: nothing.
func (k v1Key) encodeV3() []byte {
	h := sha256.Sum256([]byte(k.secret))
	b := append([]byte{3, k.flags}, h[:]...)
	b = binary.AppendUvarint(b, uint64(k.lifetime))
	for _, t := range k.times {
		b = binary.AppendVarint(b, t)
	}
	pol := policyBytes(usageWindow(k.limit))
	for _, s := range []string{k.name, k.model, string(pol)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return append(b, 0)
}

// encodeLegacy writes a legacy record (l/<id>): version 1, the count, then
// each window's start (zigzag for the first, the delta after) and tokens.
func encodeLegacy(ws [][2]int64) []byte {
	b := binary.AppendUvarint([]byte{1}, uint64(len(ws)))
	for i, w := range ws {
		if i == 0 {
			b = binary.AppendVarint(b, w[0])
		} else {
			b = binary.AppendUvarint(b, uint64(w[0]-ws[i-1][0]))
		}
		b = binary.AppendUvarint(b, uint64(w[1]))
	}
	return b
}

// rollingState returns the encoding of a RollingWindow state of the
// default usage window with tokens[i] recorded at at[i].
func rollingState(t *testing.T, limit int64, at []time.Time, tokens []int64) []byte {
	rw := strategies.RollingWindow{Limit: limit, Window: 5 * time.Hour, Bucket: 5 * time.Minute}
	d := rw.Prepare()
	st := d.NewState()
	for i := range at {
		_, err := d.Decide(st, strategies.Call{Now: at[i].UnixNano(), N: tokens[i], Record: true})
		require.NoError(t, err)
	}
	return st.AppendEncode(nil)
}

// TestUpgradeVersion1 writes keys as the version 1 key store stored them
// (their usage window inside the record) and opens the key store on them:
// each record is rewritten at version 3, the usage it held is kept
// exactly (in the engine's window state), pending legacy usage is merged
// once on top, the old secrets still authenticate, and a record whose
// window cannot be decoded makes its key corrupt.
func TestUpgradeVersion1(t *testing.T) {
	forEach(t, func(t *testing.T, e *env) {
		full := v1Key{
			id: "key_00000000000000a1", secret: "rsk_version_one_full", flags: flagExpires | flagCreated | flagLastUsed,
			limit: 1000, lifetime: 123_456,
			times: []int64{t0.Add(24 * time.Hour).UnixNano(), t0.Add(-48 * time.Hour).UnixNano(), t0.Add(-10 * time.Minute).UnixNano()},
			name:  "v1 key", model: "glm-4.7",
			window: rollingState(t, 1000, []time.Time{t0.Add(-time.Hour), t0.Add(-10 * time.Minute)}, []int64{300, 200}),
		}
		idle := v1Key{id: "key_00000000000000a2", secret: "pk_live_version_one_idle", flags: flagDisabled, limit: 10}
		legacy := v1Key{
			id: "key_00000000000000a3", secret: "pk_live_version_one_legacy", flags: flagLegacy, limit: 500, lifetime: 77,
			window:        rollingState(t, 500, []time.Time{t0.Add(-20 * time.Minute)}, []int64{100}),
			legacyWindows: [][2]int64{{t0.Add(-6 * time.Hour).UnixNano(), 1000}, {t0.Add(-30 * time.Minute).UnixNano(), 40}},
		}
		broken := v1Key{id: "key_00000000000000a4", secret: "pk_live_version_one_broken", limit: 10, window: []byte("72|nonsense")}
		keys := []v1Key{full, idle, legacy, broken}

		// A database as the version 1 key store left it.
		e.close()
		e.openDB()
		for _, k := range keys {
			e.rawPut("k/"+k.id, k.encodeV1())
			e.rawPut(hashKey(k.secret), []byte(k.id))
			if k.legacyWindows != nil {
				e.rawPut("l/"+k.id, encodeLegacy(k.legacyWindows))
			}
		}
		e.close()
		e.openDB()
		e.openStore()

		wantFull := keystore.Key{ID: full.id, Name: "v1 key", Model: "glm-4.7", Policy: onePolicy(1000), TokenLimit: 1000,
			ExpiresAt: t0.Add(24 * time.Hour), CreatedAt: t0.Add(-48 * time.Hour), LastUsed: t0.Add(-10 * time.Minute),
			LifetimeTokens: 123_456}
		fullUsage := oneUsage(wu(500, 1000, 4*time.Hour+50*time.Minute, t0.Add(4*time.Hour)), 0)
		check := func(stage string) {
			t.Helper()
			for _, k := range keys[:3] {
				require.Equal(t, k.encodeV3(), e.rawGet("k/"+k.id), "%s: %s is rewritten at version 3", stage, k.id)
			}
			got, err := e.ks.Authenticate(ctx, full.secret)
			require.NoError(t, err, stage)
			require.Equal(t, wantFull, got, stage)
			require.Equal(t, fullUsage, e.usage(full.id), "%s: the usage is kept exactly", stage)
			require.Equal(t, strategies.Result{Allowed: true, Limit: 1000, Remaining: 500, ResetAfter: 4*time.Hour + 50*time.Minute},
				e.check(full.secret), stage)

			got, err = e.ks.Authenticate(ctx, idle.secret)
			require.ErrorIs(t, err, keystore.ErrDisabled, stage)
			require.Equal(t, idle.id, got.ID)
			require.Equal(t, oneUsage(wu(0, 10, 0, time.Time{}), 0), e.usage(idle.id), stage)

			_, err = e.ks.Get(ctx, broken.id)
			require.ErrorIs(t, err, keystore.ErrCorrupt, stage)
			require.ErrorContains(t, err, broken.id, stage)
			_, err = e.ks.Authenticate(ctx, broken.secret)
			require.ErrorIs(t, err, keystore.ErrCorrupt, stage)
			require.Equal(t, broken.encodeV1(), e.rawGet("k/"+broken.id), "%s: a corrupt record is left as it is", stage)
		}
		check("open")

		// The legacy key: its v1 window, then its legacy usage merged on
		// first touch, once; the window of 6 hours ago has expired.
		_, err := e.ks.Authenticate(ctx, legacy.secret)
		require.NoError(t, err)
		require.Equal(t, 1, e.pending())
		require.Equal(t, int64(140), e.usage(legacy.id).Used)
		require.Equal(t, int64(77), e.get(legacy.id).LifetimeTokens)
		require.Equal(t, 0, e.pending())
		keys[2].flags = 0 // merged: the record says so
		require.Equal(t, keys[2].encodeV3(), e.rawGet("k/"+legacy.id))

		e.reopen()
		check("reopen")
		require.Equal(t, int64(140), e.usage(legacy.id).Used)

		// A crash between the upgrade's two commits leaves the state
		// written and the record at version 1: the next upgrade sets the
		// state again, it does not add to it.
		e.rawPut("k/"+full.id, full.encodeV1())
		e.reopen()
		check("upgraded twice")
	})
}
