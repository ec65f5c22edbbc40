package ledger_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/ledger"
)

// TestSharedRedis: two gateways' ledgers on one Redis, writing at once,
// each as its own writer; either answers for both, the rollups equal to
// the entries.
func TestSharedRedis(t *testing.T) {
	clock := fakeclock.New(t0)
	st := backendtest.Redis.Open(t, clock)
	var envs [2]*env
	for i := range envs {
		e := &env{t: t, be: backendtest.Redis, clock: clock}
		bind(e, st.Another(), ledger.Options{})
		t.Cleanup(e.close)
		envs[i] = e
	}
	var mu sync.Mutex
	var all []ledger.Entry
	var wg sync.WaitGroup
	for i, e := range envs {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 9))
			for j := range 200 {
				en := e.record(randomEntry(r, j))
				mu.Lock()
				all = append(all, en)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, e := range envs {
		s, err := e.led.Spend(ctx, ledger.SpendQuery{GroupBy: []string{ledger.ByKey}})
		require.NoError(t, err)
		requireSpend(t, all, s)
		got := pages(t, e, ledger.RequestQuery{Limit: 1000})
		require.Len(t, got, len(all))
	}
}
