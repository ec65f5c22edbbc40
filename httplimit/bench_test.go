package httplimit_test

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/httplimit"
	"github.com/ratestore/ratestore/strategies"
	"github.com/stretchr/testify/require"
)

// BenchmarkMiddleware measures what the middleware adds to a request:
// compare each case with "bare", the handler alone. The database is in
// Async mode, so that a decision is made in memory and its commit waited
// for by no one, and the limits never deny.
func BenchmarkMiddleware(b *testing.B) {
	db, err := ratestore.Open(filepath.Join(b.TempDir(), "ratestore.db"), ratestore.Options{Durability: ratestore.Async})
	require.NoError(b, err)
	b.Cleanup(func() { db.Close() })
	limiter := func(name string) *ratestore.Limiter {
		l, err := db.Limiter(name, strategies.GCRA{Rate: 1e9, Burst: 1e9})
		require.NoError(b, err)
		return l
	}
	bare := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	wrap := func(rules ...httplimit.Rule) http.Handler {
		m, err := httplimit.New(httplimit.Options{Rules: rules})
		require.NoError(b, err)
		return m.Wrap(bare)
	}

	for _, c := range []struct {
		name string
		h    http.Handler
	}{
		{"bare", bare},
		{"ClientIP", wrap(httplimit.Rule{Limiter: limiter("ip"), Key: httplimit.ClientIP()})},
		{"APIKey", wrap(httplimit.Rule{Limiter: limiter("key"), Key: httplimit.APIKey()})},
		{"APIKey+Route", wrap(
			httplimit.Rule{Limiter: limiter("key2"), Key: httplimit.APIKey()},
			httplimit.Rule{Limiter: limiter("route"), Key: httplimit.Route()},
		)},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, "/v1/items", nil)
			req.RemoteAddr = "192.0.2.1:40000"
			req.Header.Set("Authorization", "Bearer sk-bench-0123456789")
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				c.h.ServeHTTP(rec, req)
				if rec.Code != http.StatusNoContent {
					b.Fatalf("status %d", rec.Code)
				}
			}
		})
	}
}
