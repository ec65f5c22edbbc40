package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/redisstore"
)

// TestConcurrentFinishesOnRedis: goroutines of one process finish
// requests of one key at once on Redis, where a Finish decides on the
// values this process last saw and runs again when they changed (a
// conflict): every request has one entry, and the rollups count exactly
// the entries.
func TestConcurrentFinishesOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	db, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Timeout: 5 * time.Second})
	require.NoError(t, err)
	ks, led, _, err := crashStores(db)
	require.NoError(t, err)
	_, secret, err := ks.Create(ctx, keystore.Spec{Name: "crash", Policy: keystore.Policy{Windows: []keystore.Window{{Limit: 1 << 40, Window: 5 * time.Hour}}}})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for n := range 100 {
				a, err := ks.Admit(context.Background(), secret, keystore.Request{Reserve: 100})
				require.NoError(t, err)
				note, err := led.Note(ledger.Entry{RequestID: fmt.Sprintf("req_%04x%012x", w, n), Key: a.Key().ID, Model: "m", Tokens: ledger.Tokens{Input: 10}, Status: 200})
				require.NoError(t, err)
				_, err = a.FinishWith(context.Background(), 10, 0, note)
				note.Done(err)
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	es := crashEntries(t, led)
	sp, err := led.Spend(ctx, ledger.SpendQuery{})
	require.NoError(t, err)
	t.Log(len(es), sp.Total.Requests)
	n := 0
	require.NoError(t, db.Scan(ctx, []byte("L/"), func(k, v []byte) error {
		n++
		if n < 30 {
			t.Logf("%q", k)
		}
		return nil
	}))
}
