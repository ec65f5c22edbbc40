package keystore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/redisstore"
)

// TestRedisRoundTripsSubLimits: on Redis, a key with an end-user limit and
// a model limit costs what TestRedisRoundTrips' key does, an Admit two
// round trips and a Finish one, for an end user never seen as for one
// seen before: the sub-limits' states are read with the key's, in the
// Admit's one read.
func TestRedisRoundTripsSubLimits(t *testing.T) {
	srv := redistest.Start(t)
	rdb, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer rdb.Close()
	trips := redistest.CountTrips(rdb.Client())
	ks, err := keystore.Open(rdb, keystore.Options{})
	require.NoError(t, err)
	_, secret, err := ks.Create(ctx, keystore.Spec{Name: "k", Policy: keystore.Policy{
		Windows:     hour(1e9),
		EndUsers:    keystore.EndUsers{Windows: []keystore.Window{{Limit: 1e6, Window: 24 * time.Hour}}},
		ModelLimits: []keystore.ModelLimit{{Models: []string{"gpt-4o*"}, Windows: hour(1e9)}},
	}})
	require.NoError(t, err)
	step := func(what string, want int64, fn func() error) {
		t.Helper()
		before := trips()
		require.NoError(t, fn(), what)
		require.Equal(t, want, trips()-before, what)
	}
	for i := range 6 {
		name := fmt.Sprintf("u-%d", i%3) // three never seen, then each again
		var adm *keystore.Admission
		step("Admit "+name, 2, func() (err error) {
			adm, err = ks.Admit(ctx, secret, keystore.Request{Model: "gpt-4o", EndUser: name, Reserve: 100})
			return err
		})
		step("Finish "+name, 1, func() error { _, err := adm.Finish(ctx, 40); return err })
	}
}
