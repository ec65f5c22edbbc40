package legacy

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/legacytest"
)

// The files the tests read are legacytest's.
const (
	secret = legacytest.Secret
	del    = legacytest.Del
)

var (
	entryJSON      = legacytest.EntryJSON
	fileJSON       = legacytest.FileJSON
	issueStrings   = legacytest.IssueStrings[Issue]
	reportTexts    = legacytest.ReportTexts
	genFile        = legacytest.GenFile
	genTokens      = legacytest.GenTokens
	genWindowStart = legacytest.GenWindowStart
	ts             = legacytest.Time
)

// checkInvariants asserts what parseLegacy promises of any outcome.
func checkInvariants(t testing.TB, keys []Key, rep Report, err error) {
	t.Helper()
	if err != nil {
		require.ErrorIs(t, err, ErrRefused)
		require.True(t, rep.Refused(), "an error without refusals: %v", err)
		require.Nil(t, keys)
		require.Zero(t, rep.Keys)
		require.Zero(t, rep.Windows)
		return
	}
	require.False(t, rep.Refused())
	require.Equal(t, len(keys), rep.Keys)
	require.Equal(t, rep.Entries, rep.Keys+len(rep.Skips))
	windows := 0
	secrets := map[string]bool{}
	for _, k := range keys {
		require.NotEmpty(t, strings.TrimSpace(k.Secret))
		require.False(t, secrets[k.Secret], "a secret imported twice")
		secrets[k.Secret] = true
		require.Positive(t, k.TokenLimit)
		require.GreaterOrEqual(t, k.LifetimeTokens, int64(0))
		var sum int64
		for i, w := range k.Windows { // no testify per window: 100k of them
			if w.Tokens < 0 || w.Tokens > math.MaxInt64-sum {
				t.Fatalf("window %d: tokens %d, negative or overflowing %d", i, w.Tokens, sum)
			}
			sum += w.Tokens
			if w.Start.Before(minTime) || w.Start.After(maxWindowStart) || w.Start.Location() != time.UTC {
				t.Fatalf("window %d: start %v", i, w.Start)
			}
		}
		windows += len(k.Windows)
	}
	require.Equal(t, windows, rep.Windows)
}
