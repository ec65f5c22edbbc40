package httplimit_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/redisstore"
)

// TestRedisLimiters: two Middlewares on two redisstore DBs sharing one
// redis-server (two processes) allow a client exactly its limit between
// them, with the fields of a ratestore limiter.
func TestRedisLimiters(t *testing.T) {
	srv := redistest.Start(t)
	clk := fakeclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var handlers []http.Handler
	for range 2 {
		db, err := redisstore.Open(ctx, srv.URL(), redisstore.Options{Now: clk.Now, Timeout: 10 * time.Second})
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		l, err := db.Limiter("per-ip", perMinute(10))
		require.NoError(t, err)
		h, _ := served(t, httplimit.Options{Rules: []httplimit.Rule{{Limiter: l, Key: httplimit.ClientIP()}}})
		handlers = append(handlers, h)
	}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			code := get(handlers[i%2], "/").Code
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Equal(t, map[int]int{http.StatusOK: 10, http.StatusTooManyRequests: 20}, codes)
	w := get(handlers[0], "/")
	require.Equal(t, `"per-ip";q=10;w=60`, w.Header().Get("RateLimit-Policy"))
	require.Equal(t, `"per-ip";r=0;t=60`, w.Header().Get("RateLimit"))
}
