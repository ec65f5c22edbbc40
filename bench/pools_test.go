package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/keystore"
)

// BenchmarkGatewayPools measures what choosing an upstream among a pool
// costs a request (issue 42: at most 5 µs with 16 upstreams), as the time
// and allocations of the gateway's whole ServeHTTP, in process: one
// goroutine, one key (one token window of keysLimit), the body of
// BenchmarkGatewayOverhead's request, answered by a Transport that returns
// gwCompletion from memory (no network, so that a few µs are not lost in a
// loopback round trip's noise), into an httptest.ResponseRecorder. The
// gateway is gateway.New over a bbolt database, Async, with its ledger and
// metrics, no logger. The sides, the baseline first (benchstat -col /impl):
//
//   - impl=route: Options.Upstream alone, the default route, no pools:
//     the gateway before pools, one Admit a request without quotas.
//   - impl=pool-1: Options.Upstreams, one openai upstream serving
//     "gpt-4o*" and "gpt-4.1*" with limits (requests per minute, tokens per
//     minute, requests in flight) no run reaches: its quota is held in
//     the request's Admit and settled in its Finish.
//   - impl=pool-16-nolimits: sixteen such upstreams, weights 1, 2, 3, 1,
//     ..., without limits: the pool's order (smooth weighted round robin)
//     and one Admit without quotas, as route's: the choice alone.
//   - impl=pool-16: the same sixteen with pool-1's limits: the choice,
//     then one Admit holding the first's quota, which has room.
//   - impl=pool-16-full-15: sixteen upstreams of which fifteen (weight
//     1000) have a tokens-per-minute limit below the request's
//     reservation, so each refuses it, and the sixteenth (weight 1) has
//     room. The round robin picks the sixteenth first once in 15,001
//     requests; otherwise it comes last (the others follow by weight), so
//     a request makes 16 Admits, 15 refused, before it is served: 15.999
//     on average.
//
// Every side reports ns/op, B/op and allocs/op of the whole request;
// what choosing costs is a side's figure minus route's (for the time,
// BenchmarkGatewayPoolsPaired measures it with far less noise). After the
// timed loop, the upstreams' counts (Gateway.Upstreams) are checked:
// pool-16's requests spread over all sixteen, pool-16-full-15's all on
// the last.
//
// The pool sides are in poolsides_test.go; poolsides_base9006258_test.go
// builds impl=route alone in a checkout of 9006258, the commit before
// pools, to compare the route with (see bench/README.md).
//
//	go test -run '^$' -bench '^BenchmarkGatewayPools$' -benchmem -count 6 -benchtime 1s . | tee pools.txt
//	benchstat -col /impl pools.txt
func BenchmarkGatewayPools(b *testing.B) {
	for _, impl := range poolsImpls {
		b.Run("impl="+impl, func(b *testing.B) {
			s := openPoolsSide(b, impl)
			b.ReportAllocs()
			for b.Loop() {
				s.serve(b)
			}
			b.StopTimer()
			checkPoolsSpread(b, s)
		})
	}
}

// BenchmarkGatewayPoolsPaired: each of BenchmarkGatewayPools' pool sides
// against impl=route in the same sub-benchmark, taking turns poolsBlock
// requests at a time, which side goes first alternating from pair to
// pair (as BenchmarkHotPaired does): load from other processes that lasts
// longer than a block (~0.3 ms) hits both sides of a pair alike. One op is
// a request of each side. It reports route-us and pool-us, each side's
// time over its requests, and added-us: the median over the pairs of the
// pool block's time minus the route block's, per request, what the pool
// adds to a request. (A collection falls in one block of a pair, so the
// median leaves most of the collector's share of the extra allocations
// out; BenchmarkGatewayPools counts them.)
//
//	go test -run '^$' -bench '^BenchmarkGatewayPoolsPaired$' -count 6 -benchtime 20000x . | tee paired.txt
//	benchstat paired.txt
func BenchmarkGatewayPoolsPaired(b *testing.B) {
	if len(poolsImpls) < 2 {
		b.Skip("no pools to pair with the route")
	}
	for _, impl := range poolsImpls[1:] {
		b.Run("impl="+impl, func(b *testing.B) {
			sides := [2]*poolsSide{openPoolsSide(b, "route"), openPoolsSide(b, impl)}
			var total [2]time.Duration
			added := make([]float64, 0, b.N/poolsBlock+1)
			b.ResetTimer()
			for i := 0; i < b.N; i += poolsBlock {
				n := min(poolsBlock, b.N-i)
				var d [2]time.Duration
				for k := range 2 {
					side := (i/poolsBlock + k) % 2
					t0 := time.Now()
					for range n {
						sides[side].serve(b)
					}
					d[side] = time.Since(t0)
				}
				total[0] += d[0]
				total[1] += d[1]
				added = append(added, float64(d[1]-d[0])/float64(n))
			}
			b.StopTimer()
			checkPoolsSpread(b, sides[1])
			slices.Sort(added)
			b.ReportMetric(total[0].Seconds()*1e6/float64(b.N), "route-us")
			b.ReportMetric(total[1].Seconds()*1e6/float64(b.N), "pool-us")
			b.ReportMetric(added[len(added)/2]/1e3, "added-us")
		})
	}
}

// poolsBlock is how many requests a side of BenchmarkGatewayPoolsPaired
// makes in a row.
const poolsBlock = 8

// poolsSide is a gateway of BenchmarkGatewayPools and its key's secret.
type poolsSide struct {
	impl   string
	g      *gateway.Gateway
	secret string
}

// serve makes one request of s, in process, and checks its status.
func (s *poolsSide) serve(b *testing.B) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(gwRequest))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Authorization", "Bearer "+s.secret)
	w := httptest.NewRecorder()
	s.g.ServeHTTP(w, r)
	if w.Code != http.StatusOK {
		b.Fatalf("%s: status %d: %s", s.impl, w.Code, w.Body.Bytes())
	}
	return w
}

// poolsTransport answers every request with gwCompletion, from memory.
type poolsTransport struct{}

func (poolsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	h := make(http.Header, 2)
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(gwCompletion))}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(gwCompletion)), ContentLength: int64(len(gwCompletion)), Request: r}, nil
}

// openPoolsSide opens impl's gateway over an Async bbolt database in
// b.TempDir(), with one key, and warms it (the key, the quotas' states,
// the buffers) with 64 requests; the gateway and the database are closed
// when b ends.
func openPoolsSide(b *testing.B, impl string) *poolsSide {
	db, err := ratestore.Open(filepath.Join(b.TempDir(), "pools.db"), ratestore.Options{Durability: ratestore.Async})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	ks, err := keystore.Open(db, keystore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	_, secret, err := ks.Create(context.Background(), keystore.Spec{Name: keyAt(0), TokenLimit: keysLimit})
	if err != nil {
		b.Fatal(err)
	}
	up, _ := url.Parse("http://upstream.invalid")
	opts := gateway.Options{Transport: poolsTransport{}}
	poolsOptions(b, impl, &opts, up)
	g, err := gateway.New(db, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := cmpErr(g.Wait(ctx), g.Close(ctx)); err != nil {
			b.Error(err)
		}
	})
	s := &poolsSide{impl: impl, g: g, secret: secret}
	for range 64 {
		if w := s.serve(b); w.Body.Len() != len(gwCompletion) {
			b.Fatalf("%s: %d bytes of %d", impl, w.Body.Len(), len(gwCompletion))
		}
	}
	return s
}
