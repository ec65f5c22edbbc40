package httplimit_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/strategies"
	"github.com/stretchr/testify/require"
)

// hammer sends n requests to url from workers goroutines over real
// connections, the i-th with the header fields fields(i), and counts the
// answers by status.
func hammer(t *testing.T, url string, workers, n int, fields func(i int) []string) map[int]int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer client.CloseIdleConnections()
	var (
		mu     sync.Mutex
		counts = map[int]int{}
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				req, err := http.NewRequest(http.MethodGet, url, nil)
				if err != nil {
					t.Error(err)
					return
				}
				f := fields(i)
				for j := 0; j+1 < len(f); j += 2 {
					req.Header.Set(f[j], f[j+1])
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusTooManyRequests {
					if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
						t.Errorf("429 with Retry-After %q", resp.Header.Get("Retry-After"))
					}
				}
				mu.Lock()
				counts[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return counts
}

// TestConcurrentClientsOneKey: many clients on one API key over loopback
// get exactly the limit, however they interleave.
func TestConcurrentClientsOneKey(t *testing.T) {
	e := newEnv(t)
	lim := e.limiter("api", strategies.GCRA{Rate: 1.0 / 3600, Burst: 50})
	h, calls := served(t, httplimit.Options{Rules: []httplimit.Rule{{Limiter: lim, Key: httplimit.APIKey()}}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	counts := hammer(t, srv.URL, 32, 320, func(int) []string { return []string{"Authorization", "Bearer shared-key"} })
	require.Equal(t, map[int]int{http.StatusOK: 50, http.StatusTooManyRequests: 270}, counts)
	require.EqualValues(t, 50, calls.Load())
	require.EqualValues(t, 0, remaining(t, lim, httplimit.APIKeyHash("shared-key")))
}

// TestConcurrentSeveralRulesExact: with two rules, concurrent requests
// over loopback get exactly the tighter limit, and the looser rule counts
// exactly the allowed requests: the denied ones took nothing from it.
func TestConcurrentSeveralRulesExact(t *testing.T) {
	e := newEnv(t)
	perKey := e.limiter("per-key", perMinute(1000))
	global := e.limiter("global", perMinute(25))
	h, calls := served(t, httplimit.Options{Rules: []httplimit.Rule{
		{Limiter: perKey, Key: httplimit.APIKey()},
		{Limiter: global, Key: httplimit.Route()},
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	const keys = 8
	counts := hammer(t, srv.URL, 32, 200, func(i int) []string {
		return []string{"X-API-Key", fmt.Sprint("key-", i%keys)}
	})
	require.Equal(t, map[int]int{http.StatusOK: 25, http.StatusTooManyRequests: 175}, counts)
	require.EqualValues(t, 25, calls.Load())
	var taken int64
	for k := range keys {
		taken += 1000 - remaining(t, perKey, httplimit.APIKeyHash(fmt.Sprint("key-", k)))
	}
	require.EqualValues(t, 25, taken, "the per-key rule counted the allowed requests, and only them")
	require.EqualValues(t, 0, remaining(t, global, "GET /"))
}
