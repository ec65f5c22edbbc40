package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/internal/redistest"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/redisstore"
)

// The gateway benchmarks measure what package gateway adds to a request
// over calling the same upstream directly, both in the same run, with a
// bare httputil.ReverseProxy (impl=reverseproxy) in between as a second
// baseline: the hop alone, so that the gateway's own work is the
// difference between the two:
//
//   - BenchmarkGatewayOverhead: the latency of one non-streamed chat
//     completion (a 1 KiB JSON body with a usage object), 64 concurrent
//     clients on keep-alive connections. Target (DESIGN.md): at 1000
//     requests/s, the p50 the gateway adds over direct is at most 1.2×
//     what the bare proxy adds in the same run (bench/report computes the
//     ratio within each invocation).
//   - BenchmarkGatewayStream: for every event of a streamed chat
//     completion (SSE, one flush per event, the last one carrying the
//     usage), the delay between the upstream writing it and the client
//     reading it. Target: no buffering delay added per event.
//
// Everything is in one process on loopback: the fake upstream and the
// gateway are httptest servers, the gateway is gateway.New over a bbolt
// database in b.TempDir() (Async, and Sync in a second sub-benchmark) with
// its default Transport and no logger, and the clients share one
// http.Transport keeping up to 64 idle connections per host. Connections
// are opened and keys loaded before timing.
//
// Keys: 64 keys, client g using key g (gwKeys). A gateway serves many
// callers, each with its own key; one key shared by 64 clients would make
// every request queue on that key's lock and bookkeeping (its reservations,
// its concurrency slots), a single-tenant worst case, not the gateway's
// cost per request. Every key has one token window of keysLimit (2^40)
// tokens, which no run reaches, so every request is admitted and charged.

const (
	gwClients     = 64 // concurrent clients of BenchmarkGatewayOverhead
	gwKeys        = 64 // keys of the gateway, one per client
	gwRespBytes   = 1024
	gwEvents      = 32                     // events per stream of BenchmarkGatewayStream
	gwEventGap    = 500 * time.Microsecond // between two events of a stream
	gwStreamUsers = 1                      // concurrent streams of BenchmarkGatewayStream
	gwPacedRate   = 1000                   // requests per second of all clients, load=1000rps
)

// gwImpls are the sides, the baseline first: the upstream called directly;
// through a bare httputil.ReverseProxy (the hop alone, what any Go proxy
// adds: a second baseline); then through the gateway in each durability,
// and with its keys in a redis-server on loopback (gateway.New on a redisstore.DB).
var gwImpls = []string{"direct", "reverseproxy", "gateway-async", "gateway-sync", "gateway-redis"}

// The requests: small, as a chat completion's first turn is. The stream
// asks for its usage itself (stream_options.include_usage), so the gateway
// passes the stream on byte for byte.
var (
	gwRequest       = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello in one word."}],"max_tokens":64}`)
	gwStreamRequest = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello in one word."}],"max_tokens":64,"stream":true,"stream_options":{"include_usage":true}}`)
)

// gwCompletion is the upstream's non-streamed answer: an OpenAI chat
// completion of exactly gwRespBytes bytes, the message padded to size.
var gwCompletion = func() []byte {
	const head = `{"id":"chatcmpl-bench","object":"chat.completion","created":1700000000,"model":"gpt-4o-mini-2024-07-18",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"`
	const tail = `","refusal":null},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":14,"completion_tokens":230,"total_tokens":244,` +
		`"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}},` +
		`"system_fingerprint":"fp_bench"}`
	pad := gwRespBytes - len(head) - len(tail)
	words := strings.Repeat("Hello there. ", pad/13+1)[:pad]
	return []byte(head + words + tail)
}()

// gwClock is the clock the upstream stamps events with and the client
// reads them by: one process, one monotonic clock.
var gwClock = time.Now()

func gwNow() int64 { return int64(time.Since(gwClock)) }

// gwStampKey precedes the stamp in every streamed event: the instant (ns
// since gwClock) the upstream wrote it, 19 digits.
const gwStampKey = `"system_fingerprint":"t`

// gwEvent is the i-th of n events of a stream, stamped with now: content
// deltas, and the last one the finish with the usage, as OpenAI sends it
// when include_usage is asked.
func gwEvent(dst []byte, i, n int, now int64) []byte {
	dst = append(dst, `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini",`...)
	dst = append(dst, gwStampKey...)
	dst = append(dst, fmt.Sprintf("%019d", now)...)
	if i < n-1 {
		dst = append(dst, `","choices":[{"index":0,"delta":{"content":" token"},"logprobs":null,"finish_reason":null}],"usage":null}`...)
	} else {
		dst = append(dst, `","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":31,"total_tokens":45}}`...)
	}
	return append(dst, "\n\n"...)
}

// newFakeUpstream serves POST /v1/chat/completions: gwCompletion, or, when
// the request streams, gwEvents events gwEventGap apart, each flushed and
// stamped just before it is written, then [DONE].
func newFakeUpstream() *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		h := w.Header()
		if !bytes.Contains(body, []byte(`"stream":true`)) {
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", strconv.Itoa(len(gwCompletion)))
			w.Write(gwCompletion)
			return
		}
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		rc.Flush()
		buf := make([]byte, 0, 512)
		for i := range gwEvents {
			if i > 0 {
				time.Sleep(gwEventGap)
			}
			buf = gwEvent(buf[:0], i, gwEvents, gwNow())
			if _, err := w.Write(buf); err != nil {
				return
			}
			rc.Flush()
		}
		io.WriteString(w, "data: [DONE]\n\n")
		rc.Flush()
	})
	return httptest.NewServer(mux)
}

// gwTarget is where one side sends its requests, with the secrets of its
// keys (anything for direct, which checks none).
type gwTarget struct {
	url     string
	secrets []string
	client  *http.Client
}

// openGwTarget builds one side in front of upstream: for "direct" the
// upstream itself; otherwise a database in a temporary directory of the
// impl's durability (or a redis-server, for gateway-redis), gwKeys keys,
// and the gateway served by an httptest server. close shuts it all down,
// the store last.
func openGwTarget(tb testing.TB, impl string, upstream *httptest.Server) (*gwTarget, func() error, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * gwClients, MaxIdleConnsPerHost: 2 * gwClients, IdleConnTimeout: time.Minute}}
	t := &gwTarget{url: upstream.URL, client: client}
	if impl == "direct" {
		t.secrets = []string{"sk-direct"}
		return t, func() error { client.CloseIdleConnections(); return nil }, nil
	}
	up, _ := url.Parse(upstream.URL)
	if impl == "reverseproxy" {
		// The hop alone: what any Go reverse proxy adds, with the transport
		// settings of the gateway's default Transport.
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 256
		rp := &httputil.ReverseProxy{Transport: tr, Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(up) }}
		// The upstream request outlives a caller's hang-up, as the
		// gateway's model calls do (see its package documentation).
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rp.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
		}))
		t.url, t.secrets = srv.URL, []string{"sk-direct"}
		return t, func() error { client.CloseIdleConnections(); srv.Close(); tr.CloseIdleConnections(); return nil }, nil
	}
	var (
		ks      *keystore.Store
		g       *gateway.Gateway
		closeDB func() error
		err     error
	)
	if impl == "gateway-redis" {
		srv := redistest.Start(tb)
		rdb, oerr := redisstore.Open(context.Background(), srv.URL()+"?pool_size="+strconv.Itoa(2*gwClients), redisstore.Options{})
		if oerr != nil {
			return nil, nil, oerr
		}
		closeDB = rdb.Close
		if ks, err = keystore.Open(rdb, keystore.Options{}); err == nil {
			g, err = gateway.New(rdb, gateway.Options{Upstream: up})
		}
	} else {
		d := ratestore.Async
		if impl == "gateway-sync" {
			d = ratestore.Sync
		}
		db, oerr := ratestore.Open(filepath.Join(tb.TempDir(), impl+".db"), ratestore.Options{Durability: d})
		if oerr != nil {
			return nil, nil, oerr
		}
		closeDB = db.Close
		if ks, err = keystore.Open(db, keystore.Options{}); err == nil {
			g, err = gateway.New(db, gateway.Options{Upstream: up})
		}
	}
	for i := 0; err == nil && i < gwKeys; i++ {
		var secret string
		_, secret, err = ks.Create(context.Background(), keystore.Spec{Name: keyAt(i), TokenLimit: keysLimit})
		t.secrets = append(t.secrets, secret)
	}
	if err != nil {
		closeDB()
		return nil, nil, err
	}
	srv := httptest.NewServer(g)
	t.url = srv.URL
	return t, func() error {
		client.CloseIdleConnections()
		srv.Close() // waits for the handlers
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return cmpErr(g.Wait(ctx), closeDB())
	}, nil
}

func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// post sends body to the target's chat completions with secret and
// returns the response, status 200 checked.
func (t *gwTarget) post(secret string, body []byte) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, t.url+"/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := t.client.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, msg)
	}
	return resp, nil
}

// complete makes one non-streamed request and reads its whole response.
func (t *gwTarget) complete(secret string) error {
	resp, err := t.post(secret, gwRequest)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil && n != int64(len(gwCompletion)) {
		err = fmt.Errorf("read %d bytes of %d", n, len(gwCompletion))
	}
	return err
}

// warm opens the clients' connections (and the gateway's to the
// upstream) and loads every key: each of gwClients goroutines makes a few
// requests.
func (t *gwTarget) warm() error {
	var wg sync.WaitGroup
	errs := make([]error, gwClients)
	for g := range gwClients {
		wg.Go(func() {
			for range 4 {
				if errs[g] = t.complete(t.secrets[g%len(t.secrets)]); errs[g] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return cmpErr(errs...)
}

// gwDirect holds the last result of the direct side per benchmark, for the
// in-run added-* metrics of the gateway sides that run after it.
var gwDirect = map[string][2]time.Duration{}

// BenchmarkGatewayOverhead: gwClients goroutines, each one request at a
// time on keep-alive connections, take the next request number from a
// shared counter until b.N requests are made; every request's latency (from
// building it to its whole body read) goes into a slice allocated before
// the timer starts, indexed by the request number. It reports p50-us,
// p99-us, mean-us and req/s, and for the gateway sides added-p50-us and
// added-p99-us: the gateway's percentile minus direct's, direct being the
// run just before in the same process (its last round with -count).
//
// Two loads, the same 64 clients and connections:
//
//   - load=closed: every client sends its next request as soon as it has
//     read the previous response. On 2 cores this saturates the machine
//     (client, gateway and upstream share it), so a request's latency is
//     mostly its wait behind the other 63 (Little's law: latency = 64 /
//     throughput): what is added is 64 times the gateway's CPU per request
//     over the cores, its capacity more than its delay.
//
//   - load=1000rps: the clients together send gwPacedRate requests per
//     second, request k at start + k/gwPacedRate, the next free client
//     sending it (latency from its send): the machine is not saturated, so
//     what is added is the delay of the gateway's hop and work on one
//     request with 64 connections open and requests overlapping.
//
//     go test -run '^$' -bench 'GatewayOverhead' -benchtime 2s -count 6 . | tee gw.txt
//     benchstat -col /impl gw.txt
func BenchmarkGatewayOverhead(b *testing.B) {
	upstream := newFakeUpstream()
	defer upstream.Close()
	for _, load := range []string{"closed", fmt.Sprintf("%drps", gwPacedRate)} {
		for _, impl := range gwImpls {
			fx := newFixture(func() (*gwTarget, func() error, error) {
				t, closeFn, err := openGwTarget(b, impl, upstream)
				if err == nil {
					err = t.warm()
				}
				return t, closeFn, err
			})
			b.Run(fmt.Sprintf("resp=1KiB/clients=%d/load=%s/impl=%s", gwClients, load, impl), func(b *testing.B) {
				t := fx.get(b)
				lat := make([]time.Duration, b.N)
				var next atomic.Int64
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for g := range gwClients {
					wg.Go(func() {
						secret := t.secrets[g%len(t.secrets)]
						for {
							call := next.Add(1)
							if call > int64(b.N) {
								return
							}
							if load != "closed" {
								time.Sleep(time.Until(start.Add(time.Duration(call-1) * time.Second / gwPacedRate)))
							}
							t0 := time.Now()
							err := t.complete(secret)
							lat[call-1] = time.Since(t0)
							if err != nil {
								b.Error(err)
								next.Store(int64(b.N)) // the others stop
								return
							}
						}
					})
				}
				wg.Wait()
				b.StopTimer()
				if s := b.Elapsed().Seconds(); s > 0 {
					b.ReportMetric(float64(b.N)/s, "req/s")
				}
				reportLatency(b, "overhead-"+load, impl, lat)
			})
			fx.release(b)
		}
	}
}

// BenchmarkGatewayStream: gwStreamUsers client(s), each reading one stream
// at a time (b.N streams in all) of gwEvents events gwEventGap apart; for
// every event, the delay from the upstream's stamp (just before its Write
// and Flush) to the client having read its line. It reports the per-event
// p50-us, p99-us and mean-us, and for the gateway sides added-p50-us and
// added-p99-us over direct's, as BenchmarkGatewayOverhead does. A gateway
// that held events back (a buffer filled before it is passed on) would add
// up to the gap between events, or the whole stream, not microseconds.
func BenchmarkGatewayStream(b *testing.B) {
	upstream := newFakeUpstream()
	defer upstream.Close()
	for _, impl := range gwImpls {
		fx := newFixture(func() (*gwTarget, func() error, error) {
			t, closeFn, err := openGwTarget(b, impl, upstream)
			if err == nil {
				err = t.warm()
			}
			return t, closeFn, err
		})
		b.Run(fmt.Sprintf("events=%d/clients=%d/impl=%s", gwEvents, gwStreamUsers, impl), func(b *testing.B) {
			t := fx.get(b)
			delays := make([]time.Duration, b.N*gwEvents)
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for g := range gwStreamUsers {
				wg.Go(func() {
					secret := t.secrets[g%len(t.secrets)]
					for {
						call := next.Add(1)
						if call > int64(b.N) {
							return
						}
						if err := t.stream(secret, delays[(call-1)*gwEvents:call*gwEvents]); err != nil {
							b.Error(err)
							next.Store(int64(b.N))
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			reportLatency(b, "stream", impl, delays)
		})
		fx.release(b)
	}
}

// stream makes one streamed request and puts each event's delay, from
// the upstream's stamp to its line read here, in delays.
func (t *gwTarget) stream(secret string, delays []time.Duration) error {
	resp, err := t.post(secret, gwStreamRequest)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rd := bufio.NewReaderSize(resp.Body, 4096)
	n := 0
	for {
		line, err := rd.ReadSlice('\n')
		now := gwNow()
		if i := bytes.Index(line, []byte(gwStampKey)); i >= 0 && n < len(delays) {
			i += len(gwStampKey)
			stamp, perr := strconv.ParseInt(string(line[i:i+19]), 10, 64)
			if perr != nil {
				return fmt.Errorf("event %d: bad stamp: %v", n, perr)
			}
			delays[n] = time.Duration(now - stamp)
			n++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if n != len(delays) {
		return fmt.Errorf("read %d events of %d", n, len(delays))
	}
	return nil
}

// reportLatency reports the percentiles and mean of lat, and, for a
// gateway side, what it adds to the direct side of the same benchmark
// measured before it in this process.
func reportLatency(b *testing.B, bench, impl string, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	us := func(d time.Duration) float64 { return d.Seconds() * 1e6 }
	p50, p99 := percentile(lat, 50), percentile(lat, 99)
	b.ReportMetric(us(p50), "p50-us")
	b.ReportMetric(us(p99), "p99-us")
	b.ReportMetric(us(sum/time.Duration(len(lat))), "mean-us")
	if impl == "direct" {
		gwDirect[bench] = [2]time.Duration{p50, p99}
	} else if d, ok := gwDirect[bench]; ok { // reverseproxy too: the hop's share
		b.ReportMetric(us(p50-d[0]), "added-p50-us")
		b.ReportMetric(us(p99-d[1]), "added-p99-us")
	}
}
