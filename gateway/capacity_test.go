package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/internal/fakeprovider"
	"github.com/ratestore/ratestore/keystore"
)

// The capacity tests run the gateway's pools against fake providers that
// enforce their own quotas (package fakeprovider) on the test's fake
// clock: the gateway must keep each upstream within the provider's quota
// (no 429 from it) and still use nearly all of it.

// startFake serves a fake provider of opts, and returns it and its URL.
func startFake(t *testing.T, opts fakeprovider.Options) (*fakeprovider.Provider, *url.URL) {
	p := fakeprovider.New(opts)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return p, u
}

// laterClock is the clock of an env made after the fake providers that
// need it: it reads the env's clock once there is one (start before).
// As the gateway's Options.Now (gatewayNow) it counts the tries of the
// gateway to admit a request on its upstreams.
type laterClock struct {
	e     atomic.Pointer[env]
	tries atomic.Int64
}

func (c *laterClock) Now() time.Time {
	if e := c.e.Load(); e != nil {
		return e.clock.Now()
	}
	return start
}

// gatewayNow is Now for the gateway's Options.Now, counting the reads of
// tryUpstreams (one a try; the gateway reads it elsewhere too, for the
// requests it forwards and finishes).
func (c *laterClock) gatewayNow() time.Time {
	var pcs [4]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ").tryUpstreams") {
			c.tries.Add(1)
			break
		}
		if !more {
			break
		}
	}
	return c.Now()
}

// chatBody is the body of a chat completion of about promptBytes bytes
// asking for at most maxTokens of output, which the capacityUsage of a
// fake provider answers with completion tokens.
func chatBody(promptBytes int, maxTokens, completion int64, stream bool) []byte {
	head := fmt.Sprintf("out=%d;", completion)
	b, err := json.Marshal(map[string]any{
		"model": "gpt-4o", "max_tokens": maxTokens, "stream": stream,
		"messages": []map[string]string{{"role": "user", "content": head + strings.Repeat("x", max(0, promptBytes-len(head)))}},
	})
	if err != nil {
		panic(err)
	}
	return b
}

// capacityUsage is a fake provider's Usage for chatBody's requests: the
// prompt the gateway estimates (a token per 4 bytes of body), and the
// completion the body names.
func capacityUsage(_ string, body []byte) (prompt, completion int64) {
	var q struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if json.Unmarshal(body, &q) == nil && len(q.Messages) > 0 {
		fmt.Sscanf(q.Messages[0].Content, "out=%d;", &completion)
	}
	return int64(len(body)) / 4, completion
}

// sim drives a gateway's clients on the fake clock: each client sends a
// request, then sleeps a while on the clock; the test advances the clock
// only once the gateway has settled, so that no request is admitted at
// one instant and reaches its provider at another.
type sim struct {
	t       *testing.T
	e       *env
	clock   *laterClock
	clients int
	fakes   []*fakeprovider.Provider

	mu       sync.Mutex
	sleepers map[chan struct{}]time.Time // the clients waiting for the clock, until when
}

// sleepUntil parks the calling client until the clock reaches at, or ctx
// ends (false).
func (s *sim) sleepUntil(ctx context.Context, at time.Time) bool {
	ch := make(chan struct{})
	s.mu.Lock()
	s.sleepers[ch] = at
	s.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// quiet reports whether every client waits, for the clock or in the
// gateway's line, and the gateway serves no request but those in its
// line: none is on its way in, out, or finishing (which reads
// Options.Now, and wakes the line's head).
func (s *sim) quiet() bool {
	s.mu.Lock()
	sleeping := len(s.sleepers)
	s.mu.Unlock()
	g := s.e.gw
	waiting := int(g.lines.waiting.Load())
	g.active.mu.Lock()
	active := g.active.n
	g.active.mu.Unlock()
	return sleeping+waiting == s.clients && active == waiting
}

// arrived is how many requests the fake providers got.
func (s *sim) arrived() int64 {
	var n int64
	for _, p := range s.fakes {
		n += p.Stats().Requests
	}
	return n
}

// usage returns the upstreams' quotas' usage, read without the gateway's
// clock (Gateway.Upstreams reads it).
func (s *sim) usage() []keystore.Usage {
	var us []keystore.Usage
	for _, m := range s.e.gw.ups.Load().members {
		u, err := s.e.gw.keys.QuotaUsage(context.Background(), m.quotas[0])
		require.NoError(s.t, err)
		us = append(us, u)
	}
	return us
}

// inFlight is how many requests hold a slot of an upstream: admitted and
// not finished.
func (s *sim) inFlight() int {
	n := 0
	for _, u := range s.usage() {
		n += u.InFlight
	}
	return n
}

// waitFor polls cond until it holds; a bound, not a timing.
func (s *sim) waitFor(what string, cond func() bool) {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("sim: waiting for %s: quiet %v, %d in flight", what, s.quiet(), s.inFlight())
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// settle waits until nothing can happen before the clock moves: the
// gateway quiet, no request admitted and not finished, and the head of
// the line (if any) refused, with nothing admitted since. Once the
// gateway was seen so, the head is told to try again until it has begun
// two tries: the second began once the first, which began after, was
// refused. When no request reached a provider meanwhile and the gateway
// is still quiet (an admitted request would be on its way, not quiet,
// or arrived), nothing changed since that refusal, and every try is
// refused until the clock moves.
func (s *sim) settle() {
	for {
		s.waitFor("the gateway to be quiet", s.quiet)
		arrived := s.arrived()
		if s.inFlight() != 0 || !s.quiet() {
			continue
		}
		if s.e.gw.lines.waiting.Load() == 0 {
			return // only sleepers: the clock wakes them
		}
		tries := s.clock.tries.Load()
		for i := int64(1); i <= 2; i++ {
			s.e.gw.lines.finished() // the head tries again at once
			s.waitFor("the head to try", func() bool {
				return s.clock.tries.Load() >= tries+i || s.arrived() != arrived || !s.quiet()
			})
		}
		if s.arrived() == arrived && s.quiet() && s.inFlight() == 0 {
			return
		}
	}
}

// advance moves the clock by d and wakes the clients whose sleep is over.
func (s *sim) advance(d time.Duration) {
	if !s.quiet() || s.inFlight() != 0 {
		s.t.Errorf("sim: the clock moves at %v with the gateway busy", s.e.clock.Now().Sub(start))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.e.clock.Advance(d)
	now := s.e.clock.Now()
	for ch, at := range s.sleepers {
		if !at.After(now) {
			delete(s.sleepers, ch)
			close(ch)
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// charged is the tokens the fake providers charged, and the 429s they
// answered.
func (s *sim) charged() (tokens, limited int64) {
	for _, p := range s.fakes {
		st := p.Stats()
		tokens, limited = tokens+st.TokensCharged, limited+st.Limited
	}
	return tokens, limited
}

// TestCapacitySustained is the target of issue 42: under sustained load
// (many clients of several keys, more than the upstreams can take), a
// pool of upstreams whose providers enforce their tokens per minute, the
// gateway configured with the same limits, gets no 429 from them and
// uses at least 95% of their capacity, the clients waiting in the
// gateway's line instead of failing. The clock moves in uneven steps, so
// that requests come at any instant of a second, not on the window's
// bucket boundaries.
func TestCapacitySustained(t *testing.T) {
	tpm := []int64{10_000, 20_000}
	const (
		clients, keys = 32, 4
		warmUp        = 2 * time.Minute
		measured      = 4 * time.Minute
	)
	clock := &laterClock{}
	var ups []Upstream
	var fakes []*fakeprovider.Provider
	for i, n := range tpm {
		p, u := startFake(t, fakeprovider.Options{API: fakeprovider.OpenAI, TokensPerMinute: n, Now: clock.Now, Usage: capacityUsage})
		fakes = append(fakes, p)
		ups = append(ups, Upstream{Name: fmt.Sprintf("up%d", i), API: APIOpenAI, URL: u, Limits: UpstreamLimits{TokensPerMinute: n}})
	}
	e := newEnv(t, Options{Upstreams: ups, Now: clock.gatewayNow, UpstreamQueueTimeout: 5 * time.Minute})
	clock.e.Store(e)
	s := &sim{t: t, e: e, clock: clock, clients: clients, fakes: fakes, sleepers: map[chan struct{}]time.Time{}}
	var secrets []string
	for i := range keys {
		_, secret := e.key(fmt.Sprintf("k%d", i), 1<<50)
		secrets = append(secrets, secret)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait() // also when the test fails: the clients end before the servers close
	defer stop()
	var served, refused atomic.Int64
	for c := range clients {
		rng := rand.New(rand.NewPCG(42, uint64(c)))
		// The clients start one by one over the first minute, each
		// sending a request 5 to 20 s after its last one's answer:
		// together, once all started, about a third more than the
		// upstreams can serve. A load that came all at once would be
		// served in bursts, each a minute after the last, forever (the
		// calls take no time on the clock): measured over minutes that
		// hold 4 bursts or 5, it tells nothing.
		next := start.Add(time.Duration(c) * warmUp / 2 / clients)
		wg.Go(func() {
			for s.sleepUntil(ctx, next) {
				maxTokens := int64(50 + rng.IntN(350))
				body := chatBody(80+rng.IntN(800), maxTokens, maxTokens*int64(30+rng.IntN(71))/100, false)
				req, err := http.NewRequestWithContext(ctx, "POST", e.srv.URL+"/v1/chat/completions", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				req.Header.Set("Authorization", "Bearer "+secrets[c%keys])
				res, b, err := e.try(req)
				switch {
				case ctx.Err() != nil:
					return
				case err != nil:
					t.Error(err)
					return
				case res.StatusCode == http.StatusOK:
					served.Add(1)
				default:
					if refused.Add(1) == 1 {
						t.Errorf("the first refusal: status %d: %s", res.StatusCode, b)
					}
				}
				next = e.clock.Now().Add(5*time.Second + time.Duration(rng.IntN(15_000))*time.Millisecond)
			}
		})
	}

	// The clock moves in steps of 100 to 900 ms, landing on the
	// measurement's start and end, and on the next second when it would
	// pass it: the head of the line may be trying as it moves (settle
	// saw it refused, and it tries again every 250 ms), and a decision
	// of the embedded engine reads the clock at each step (the key
	// store holds the reservation at the instant it read first, checks
	// the windows at the instants they read): checked at 5.3 s, held at
	// 4.8 s, a request's tokens would leave the upstream's window at
	// 65 s, before the provider's minute of 5.3 s is over. Landing on
	// the second keeps such a request within its bucket's margin.
	rng := rand.New(rand.NewPCG(42, 42))
	from, to := start.Add(warmUp), start.Add(warmUp+measured)
	var tokensFrom int64
	var fill float64 // the sum over the measured steps of the windows' use of their limits
	steps := 0
	for {
		s.settle()
		now := e.clock.Now()
		if now.Equal(from) {
			tokensFrom, _ = s.charged()
		}
		if now.After(from) {
			for i, u := range s.usage() {
				fill += float64(u.Windows[0].Used) / float64(tpm[i]) / float64(len(tpm))
			}
			steps++
		}
		if !now.Before(to) {
			break
		}
		next := now.Add(time.Duration(100+rng.IntN(801)) * time.Millisecond)
		if sec := next.Truncate(time.Second); sec.After(now) {
			next = sec
		}
		if now.Before(from) {
			next = minTime(next, from)
		}
		s.advance(minTime(next, to).Sub(now))
	}
	tokensTo, limited := s.charged()

	capacity := float64(0)
	for _, n := range tpm {
		capacity += float64(n) * measured.Minutes()
	}
	used := float64(tokensTo-tokensFrom) / capacity
	t.Logf("%d served (%d tries to admit); %d tokens charged in %v of %.0f: %.2f%% of the capacity; %d 429s from the providers; "+
		"the gateway's windows held %.2f%% of their limits when the clock moved",
		served.Load(), clock.tries.Load(), tokensTo-tokensFrom, measured, capacity, 100*used, limited, 100*fill/float64(steps))
	require.Zero(t, refused.Load(), "the clients waited instead of failing")
	require.Zero(t, limited, "no 429 from the providers")
	require.GreaterOrEqual(t, used, 0.95, "the capacity used")
}

// sendBody sends body to e's chat completions for secret, and returns
// the answer's status and body.
func sendBody(e *env, secret string, body []byte) (int, string) {
	e.t.Helper()
	res, b := e.call("POST", "/v1/chat/completions", secret, json.RawMessage(body))
	return res.StatusCode, string(b)
}

// TestCapacityBucketEdge: an upstream's tokens count a whole minute from
// the instant they were taken, as a provider that counts an exact
// rolling minute holds them. A request at 0.5 s is in the bucket of
// [0 s, 1 s), whose minute is over at 60 s; its tokens still count there
// (the gateway refuses with its own 429, where it once sent the request
// on and the provider answered 429), until the bucket's minute and a
// bucket more, 61 s.
func TestCapacityBucketEdge(t *testing.T) {
	clock := &laterClock{}
	fake, u := startFake(t, fakeprovider.Options{API: fakeprovider.OpenAI, TokensPerMinute: 1000, Now: clock.Now})
	e := newEnv(t, Options{UpstreamQueueTimeout: -1,
		Upstreams: []Upstream{{Name: "a", API: APIOpenAI, URL: u, Limits: UpstreamLimits{TokensPerMinute: 1000}}}})
	clock.e.Store(e)
	_, secret := e.key("k", 1<<40)
	body := chatBody(400, 500, 500, false) // reserves, and is charged, 600 tokens

	e.clock.Advance(500 * time.Millisecond)
	status, b := sendBody(e, secret, body)
	require.Equal(t, http.StatusOK, status, b)
	for _, at := range []time.Duration{60 * time.Second, 60*time.Second + 500*time.Millisecond} {
		e.clock.Set(start.Add(at))
		status, b = sendBody(e, secret, body)
		require.Equal(t, http.StatusTooManyRequests, status, "at %v: %s", at, b)
		require.Contains(t, b, "upstream_capacity", "at %v: the gateway's own refusal", at)
	}
	e.clock.Set(start.Add(61 * time.Second))
	status, b = sendBody(e, secret, body)
	require.Equal(t, http.StatusOK, status, b)
	st := fake.Stats()
	require.Zero(t, st.Limited)
	require.EqualValues(t, 2, st.Served)
}

// sharedUse is the use of upstream name that e's GET /admin/upstreams
// reports.
func sharedUse(e *env, name string) admin.UpstreamUsed {
	e.t.Helper()
	for _, u := range adminOK[admin.Upstreams](e, "GET", "/admin/upstreams", nil, http.StatusOK).Upstreams {
		if u.Name == name {
			return u.Used
		}
	}
	e.t.Fatalf("no upstream %q", name)
	return admin.UpstreamUsed{}
}

// TestRedisCapacityExact: two gateways on one Redis keep one upstream's
// limits as one, exactly: requests sent through both at once are admitted
// as long as the upstream's tokens per minute hold their reservations
// (the sum of those admitted never passes it, and a request is refused
// only when its own does not fit what is left) and its requests per
// minute have room (exactly that many are admitted), and both gateways'
// GET /admin/upstreams report the same use. The provider, enforcing the
// same limits, refuses nothing.
func TestRedisCapacityExact(t *testing.T) {
	const tpm, rpm, name = 6000, 40, "shared"
	clock := &laterClock{}
	fake, u := startFake(t, fakeprovider.Options{API: fakeprovider.OpenAI, TokensPerMinute: tpm, RequestsPerMinute: rpm,
		Now: clock.Now, Usage: capacityUsage})
	gws := newRedisEnvs(t, 2, Options{UpstreamQueueTimeout: -1,
		Upstreams: []Upstream{{Name: name, API: APIOpenAI, URL: u, Limits: UpstreamLimits{TokensPerMinute: tpm, RequestsPerMinute: rpm}}}})
	clock.e.Store(gws[0])
	_, secret := gws[0].key("k", 1<<50)

	// send sends bodies at once, in turn through each gateway, and
	// returns their statuses as they come (0 until then), and a wait for
	// the last.
	send := func(bodies [][]byte) ([]atomic.Int64, func()) {
		statuses := make([]atomic.Int64, len(bodies))
		var wg sync.WaitGroup
		for i, body := range bodies {
			e := gws[i%len(gws)]
			wg.Go(func() {
				res, b, err := e.try(e.request("POST", "/v1/chat/completions", secret, json.RawMessage(body)))
				if err != nil {
					t.Error(err)
					return
				}
				if res.StatusCode == http.StatusTooManyRequests && !strings.Contains(string(b), "upstream_capacity") {
					t.Errorf("a 429 not the gateway's own: %s", b)
				}
				statuses[i].Store(int64(res.StatusCode))
			})
		}
		return statuses, wg.Wait
	}
	count := func(statuses []atomic.Int64, status int64) int {
		n := 0
		for i := range statuses {
			if statuses[i].Load() == status {
				n++
			}
		}
		return n
	}

	// The tokens: 40 requests of every size, held at the provider once
	// admitted, so that each decision sees every reservation before it.
	release := fake.Hold()
	var bodies [][]byte
	var reserves []int64
	for i := range 40 {
		maxTokens := int64(100 + 53*i%500)
		b := chatBody(100+37*i%700, maxTokens, maxTokens/2, false)
		bodies, reserves = append(bodies, b), append(reserves, int64(len(b))/4+maxTokens)
	}
	statuses, wait := send(bodies)
	require.Eventually(t, func() bool {
		return count(statuses, http.StatusTooManyRequests)+fake.Stats().InFlight == len(bodies)
	}, 30*time.Second, time.Millisecond, "every request admitted or refused")
	var held, admitted int64
	for i := range statuses {
		if statuses[i].Load() == 0 {
			held += reserves[i]
			admitted++
		}
	}
	use := sharedUse(gws[0], name)
	require.Equal(t, admin.UpstreamUsed{TokensPerMinute: held, RequestsPerMinute: admitted, InFlight: int(admitted)}, use,
		"the reservations of the requests admitted, held")
	require.Equal(t, use, sharedUse(gws[1], name), "the other gateway's report")
	require.LessOrEqual(t, held, int64(tpm))
	for i := range statuses {
		if statuses[i].Load() == http.StatusTooManyRequests {
			require.Greater(t, reserves[i], tpm-held, "request %d was refused only for want of room", i)
		}
	}
	t.Logf("tokens: %d of %d requests admitted, holding %d of %d tokens", admitted, len(bodies), held, tpm)
	release()
	wait()
	require.Equal(t, int(admitted), count(statuses, http.StatusOK))
	st := fake.Stats()
	use = sharedUse(gws[0], name)
	require.Equal(t, admin.UpstreamUsed{TokensPerMinute: st.TokensCharged, RequestsPerMinute: admitted}, use,
		"settled to what the provider charged")
	require.Equal(t, use, sharedUse(gws[1], name))

	// The requests: 100 small ones, a minute later, of which the request
	// rate admits exactly 40.
	gws[0].clock.Advance(quotaMinute)
	bodies = bodies[:0]
	for range 100 {
		bodies = append(bodies, chatBody(60, 5, 5, false))
	}
	statuses, wait = send(bodies)
	wait()
	require.Equal(t, rpm, count(statuses, http.StatusOK))
	require.Equal(t, 100-rpm, count(statuses, http.StatusTooManyRequests))
	use = sharedUse(gws[0], name)
	require.Equal(t, admin.UpstreamUsed{TokensPerMinute: fake.Stats().TokensCharged - st.TokensCharged, RequestsPerMinute: rpm}, use)
	require.Equal(t, use, sharedUse(gws[1], name))
	st = fake.Stats()
	require.Zero(t, st.Limited, "the provider refused nothing")
	require.EqualValues(t, admitted+rpm, st.Served)
	t.Logf("requests: %d of 100 admitted; the provider served %d and refused %d", rpm, st.Served, st.Limited)
}

// TestFailoverNeverTwice: with fake providers, a request whose first
// upstream is down (it closes the connection without a word) goes on to
// the next, a stream too, charged once; a stream whose upstream is cut
// off after its first event, which went to the caller, is never sent to
// the next upstream (it sees no request), and the caller's stream ends
// with an error.
func TestFailoverNeverTwice(t *testing.T) {
	clock := &laterClock{}
	a, ua := startFake(t, fakeprovider.Options{API: fakeprovider.OpenAI, Now: clock.Now})
	b, ub := startFake(t, fakeprovider.Options{API: fakeprovider.OpenAI, Now: clock.Now})
	e := newEnv(t, Options{Upstreams: []Upstream{
		{Name: "a", API: APIOpenAI, URL: ua, Weight: 100}, // first, whenever it is not cooling down
		{Name: "b", API: APIOpenAI, URL: ub}}})
	clock.e.Store(e)
	k, secret := e.key("k", 1<<40)
	cooling := func(name string) bool {
		for _, u := range e.gw.Upstreams(t.Context()) {
			if u.Name == name {
				return u.CoolingDownUntil != nil
			}
		}
		t.Fatalf("no upstream %q", name)
		return false
	}

	// Down before answering: the next upstream answers, once.
	a.Down()
	status, body := sendBody(e, secret, chatBody(40, 10, 10, false))
	require.Equal(t, http.StatusOK, status, body)
	require.EqualValues(t, 1, a.Stats().Failed)
	require.EqualValues(t, 1, b.Stats().Served)
	require.Equal(t, b.Stats().TokensCharged, e.usage(k.ID).Used, "charged once, what b charged")
	require.True(t, cooling("a"))

	e.clock.Advance(5 * time.Second) // a's cooldown is over; it is still down
	res, stream := e.call("POST", "/v1/chat/completions", secret, json.RawMessage(chatBody(40, 10, 10, true)))
	require.Equal(t, http.StatusOK, res.StatusCode, "%s", stream)
	require.Contains(t, string(stream), "data: [DONE]", "the whole stream, from b")
	require.EqualValues(t, 2, a.Stats().Failed)
	require.EqualValues(t, 2, b.Stats().Served)

	// Cut off after the first event: the caller has a byte of it.
	a.Heal()
	e.clock.Advance(time.Minute)
	release := a.Hold()
	defer release()
	res, err := e.client.Do(e.request("POST", "/v1/chat/completions", secret, json.RawMessage(chatBody(40, 10, 10, true))))
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	first, err := bufio.NewReader(res.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(first, "data: {"), "the first event: %q", first)
	require.NoError(t, a.WaitHeld(t.Context(), 1))
	a.Down()
	release()
	_, err = io.ReadAll(res.Body)
	require.Error(t, err, "the caller's stream ends with an error, not its end")
	<-e.served
	require.EqualValues(t, 2, b.Stats().Requests, "never sent to b")
	require.EqualValues(t, 3, a.Stats().Failed, "cut off")
}

// TestCapacityKnownGaps reproduces where the gateway still lets through
// what a provider that enforces its quota refuses with 429 (issue 42's
// report); each is skipped until its fix: remove the Skip to see it.
func TestCapacityKnownGaps(t *testing.T) {
	// env starts a gateway of one upstream with limits, on a fake
	// provider enforcing the same, and returns them with a key's secret.
	env := func(t *testing.T, limits UpstreamLimits) (*env, *fakeprovider.Provider, string) {
		clock := &laterClock{}
		fake, u := startFake(t, fakeprovider.Options{API: fakeprovider.OpenAI, Now: clock.Now,
			TokensPerMinute: limits.TokensPerMinute, RequestsPerMinute: limits.RequestsPerMinute})
		e := newEnv(t, Options{UpstreamQueueTimeout: -1, Upstreams: []Upstream{{Name: "a", API: APIOpenAI, URL: u, Limits: limits}}})
		clock.e.Store(e)
		_, secret := e.key("k", 1<<40)
		return e, fake, secret
	}

	// The request rate is the key store's (keystore.Policy's
	// RequestsPerMinute): a minute in one-second buckets, which forgets
	// a request up to a second early, as the tokens' window did before
	// quotaMinute. A request at 0.5 s counts until 60 s, where the
	// provider's minute holds it until 60.5 s.
	t.Run("requests per minute", func(t *testing.T) {
		t.Skip("known: an upstream's requests per minute forget a request up to a bucket early (keystore's rateWindow)")
		e, fake, secret := env(t, UpstreamLimits{RequestsPerMinute: 1})
		e.clock.Advance(500 * time.Millisecond)
		status, b := sendBody(e, secret, chatBody(40, 10, 10, false))
		require.Equal(t, http.StatusOK, status, b)
		e.clock.Set(start.Add(time.Minute))
		status, b = sendBody(e, secret, chatBody(40, 10, 10, false))
		require.Equal(t, http.StatusTooManyRequests, status, b)
		require.Contains(t, b, "upstream_capacity", "the gateway's own refusal, not the provider's")
		require.Zero(t, fake.Stats().Limited)
	})

	// A call's usage is settled in the bucket of its admission, while a
	// provider that charges a call when its answer is produced (as
	// fakeprovider does) counts it a minute from then: a call that took
	// 30 s is forgotten 30 s early.
	t.Run("long call", func(t *testing.T) {
		t.Skip("known: an upstream's usage is settled at the admission's instant, not the call's end")
		e, fake, secret := env(t, UpstreamLimits{TokensPerMinute: 1000})
		body := chatBody(400, 500, 500, false) // 600 tokens, reserved and charged
		release := fake.Hold()
		done := make(chan int)
		go func() {
			res, _, err := e.try(e.request("POST", "/v1/chat/completions", secret, json.RawMessage(body)))
			if err != nil {
				t.Error(err)
				close(done)
				return
			}
			done <- res.StatusCode
		}()
		require.NoError(t, fake.WaitHeld(t.Context(), 1))
		e.clock.Advance(30 * time.Second) // the call takes 30 s; the provider charges it at its end
		release()
		require.Equal(t, http.StatusOK, <-done)
		e.clock.Set(start.Add(quotaMinute))
		status, b := sendBody(e, secret, body)
		require.Equal(t, http.StatusTooManyRequests, status, b)
		require.Contains(t, b, "upstream_capacity", "the gateway's own refusal, not the provider's")
		require.Zero(t, fake.Stats().Limited)
	})
}
