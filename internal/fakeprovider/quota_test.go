package fakeprovider_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeprovider"
)

const chatPath = "/v1/chat/completions"

// usageOf is an Options.Usage of prompt and completion tokens a call.
func usageOf(prompt, completion int64) func(string, []byte) (int64, int64) {
	return func(string, []byte) (int64, int64) { return prompt, completion }
}

// limited checks that resp is the quota's 429 for typ ("tokens",
// "requests"), with Retry-After retry ("": none).
func limited(t *testing.T, resp *http.Response, body []byte, typ, retry string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
	require.Equal(t, retry, resp.Header.Get("Retry-After"), string(body))
	e := errorOf(t, body)
	require.Equal(t, typ, e["type"], string(body))
	require.Equal(t, "rate_limit_exceeded", e["code"], string(body))
}

// TestTokensPerMinute: a rolling minute of tokens, on the provider's
// clock: a call that does not fit gets 429 with the seconds until enough
// of the charges before it are a minute old.
func TestTokensPerMinute(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.OpenAI, TokensPerMinute: 1000, Usage: usageOf(100, 200)})
	const chat = `{"model":"gpt-4o"}`
	ok := func() {
		t.Helper()
		resp, body := e.post(chatPath, chat)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	ok() // 0s: 300
	e.clock.Advance(30 * time.Second)
	ok()
	ok() // 30s: 900
	resp, body := e.post(chatPath, chat)
	limited(t, resp, body, "tokens", "30") // the first call's 300 leave at 60s
	require.Contains(t, errorOf(t, body)["message"], "tokens per min (TPM): Limit 1000, Used 900, Requested 300")
	e.clock.Advance(29 * time.Second)
	resp, body = e.post(chatPath, chat)
	limited(t, resp, body, "tokens", "1")
	e.clock.Advance(time.Second)
	ok() // 60s: 900
	resp, body = e.post(chatPath, chat)
	limited(t, resp, body, "tokens", "30")
	e.clock.Advance(30 * time.Second)
	ok() // 90s: 600
	s := e.idle()
	require.Equal(t, fakeprovider.Stats{Requests: 8, Served: 5, Limited: 3, TokensCharged: 1500, MaxInFlight: 1,
		Paths: map[string]int64{chatPath: 8}}, s)
}

// TestMaxOutputHeld: a call holds its prompt and its maximum output, in
// any of the fields the APIs name it by, as OpenAI checks a request; one
// that no minute can hold gets 429 without Retry-After. It is charged
// what it used.
func TestMaxOutputHeld(t *testing.T) {
	for _, c := range []struct{ api, path, field string }{
		{fakeprovider.OpenAI, chatPath, `"max_tokens":%d`},
		{fakeprovider.OpenAI, chatPath, `"max_completion_tokens":%d`},
		{fakeprovider.OpenAI, "/v1/responses", `"max_output_tokens":%d`},
		{fakeprovider.Anthropic, "/v1/messages", `"max_tokens":%d`},
		{fakeprovider.Gemini, "/v1beta/models/gemini-2.5-pro:generateContent", `"generationConfig":{"maxOutputTokens":%d}`},
	} {
		t.Run(c.api+" "+c.field, func(t *testing.T) {
			e := newEnv(t, fakeprovider.Options{API: c.api, TokensPerMinute: 1000, Usage: usageOf(100, 10)})
			body := func(most int) string { return `{"model":"m",` + fmt.Sprintf(c.field, most) + `}` }
			resp, b := e.post(c.path, body(901))
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
			require.Empty(t, resp.Header.Get("Retry-After"))
			require.Contains(t, string(b), "Request too large")
			resp, b = e.post(c.path, body(800))
			require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
			resp, b = e.post(c.path, body(800)) // 110 used: its 900 do not fit
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(b))
			require.Equal(t, "60", resp.Header.Get("Retry-After"))
			resp, b = e.post(c.path, body(790)) // 110 + 890: all of the minute
			require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
			require.EqualValues(t, 220, e.idle().TokensCharged)
		})
	}
}

// TestMinuteAtMost: whatever calls come, what is charged in any minute is
// at most TokensPerMinute; a call is served exactly when it fits what the
// last minute charged, and a refused one's Retry-After is the time until
// it fits. The calls, their usage and the clock's moves are random.
func TestMinuteAtMost(t *testing.T) {
	const tpm = 1000
	usage := func(_ string, body []byte) (int64, int64) {
		var b struct{ P, C int64 }
		require.NoError(t, json.Unmarshal(body, &b))
		return b.P, b.C
	}
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.OpenAI, TokensPerMinute: tpm, Usage: usage})
	type charge struct {
		at time.Time
		n  int64
	}
	var charges []charge
	// inMinute is what was charged in the minute up to at.
	inMinute := func(at time.Time) (n int64) {
		for _, c := range charges {
			if !c.at.After(at) && at.Before(c.at.Add(time.Minute)) {
				n += c.n
			}
		}
		return n
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 400 {
		most, p := rng.Int64N(401), rng.Int64N(301)
		c := rng.Int64N(most + 17)
		need := p + max(most, c)
		if most > 0 {
			c = min(c, most)
			need = p + most
		}
		now := e.clock.Now()
		resp, body := e.post(chatPath, fmt.Sprintf(`{"model":"m","max_tokens":%d,"p":%d,"c":%d}`, most, p, c))
		if inMinute(now)+need <= tpm {
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			charges = append(charges, charge{now, p + c})
		} else {
			require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
			wait := 1
			for inMinute(now.Add(time.Duration(wait)*time.Second))+need > tpm {
				wait++
			}
			require.Equal(t, strconv.Itoa(wait), resp.Header.Get("Retry-After"), string(body))
		}
		e.clock.Advance(time.Duration(rng.IntN(16)) * time.Second)
	}
	var total int64
	for _, c := range charges {
		require.LessOrEqual(t, inMinute(c.at), int64(tpm))
		total += c.n
	}
	s := e.idle()
	require.Equal(t, total, s.TokensCharged)
	require.EqualValues(t, len(charges), s.Served)
	require.Positive(t, s.Limited)
}

// TestRequestsPerMinute: a rolling minute of requests; a refused one does
// not count.
func TestRequestsPerMinute(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.Anthropic, RequestsPerMinute: 2})
	const msg = `{"model":"claude-sonnet-4-5","max_tokens":10}`
	ok := func() {
		t.Helper()
		resp, body := e.post("/v1/messages", msg)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	}
	ok()
	e.clock.Advance(10 * time.Second)
	ok()
	for range 3 {
		resp, body := e.post("/v1/messages", msg)
		require.Equal(t, http.StatusTooManyRequests, resp.StatusCode, string(body))
		require.Equal(t, "50", resp.Header.Get("Retry-After"))
		require.JSONEq(t, `{"type":"error","error":{"type":"rate_limit_error",
			"message":"Rate limit reached for claude-sonnet-4-5 on requests per min (RPM): Limit 2, Used 2, Requested 1. Please try again in 50s (fakeprovider)."}}`, string(body))
	}
	e.clock.Advance(50 * time.Second)
	ok()
	resp, _ := e.post("/v1/messages", msg)
	require.Equal(t, "10", resp.Header.Get("Retry-After"))
	e.clock.Advance(10 * time.Second)
	ok()
	s := e.idle()
	require.EqualValues(t, 4, s.Served)
	require.EqualValues(t, 4, s.Limited)
}

// TestInFlight: held calls are in flight: MaxConcurrent refuses the next
// (Retry-After: 1), and what they hold of the tokens counts until they
// are charged; a call whose caller goes away while held is charged
// nothing and gives its room back.
func TestInFlight(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.OpenAI, MaxConcurrent: 2, TokensPerMinute: 900, Usage: usageOf(100, 200)})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a failure bound, not a wait
	defer cancel()
	release := e.p.Hold()
	statuses := make(chan int, 2)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			resp, _ := e.post(chatPath, `{"model":"gpt-4o"}`)
			statuses <- resp.StatusCode
		})
	}
	require.NoError(t, e.p.WaitHeld(ctx, 2))
	require.Equal(t, 2, e.p.Stats().InFlight)
	resp, body := e.post(chatPath, `{"model":"gpt-4o"}`)
	limited(t, resp, body, "requests", "1")
	require.Contains(t, errorOf(t, body)["message"], "concurrent requests: Limit 2, Used 2")
	release()
	wg.Wait()
	require.Equal(t, http.StatusOK, <-statuses)
	require.Equal(t, http.StatusOK, <-statuses)

	// One held, whose caller gives up: its 300 count while it is held.
	release = e.p.Hold()
	defer release()
	gone, hangUp := context.WithCancel(ctx)
	failed := make(chan error, 1)
	go func() {
		resp, err := e.srv.Client().Do(e.request(gone, http.MethodPost, chatPath, `{"model":"gpt-4o"}`, secret))
		if err == nil {
			resp.Body.Close()
		}
		failed <- err
	}()
	require.NoError(t, e.p.WaitHeld(ctx, 1))
	resp, body = e.post(chatPath, `{"model":"gpt-4o"}`)
	limited(t, resp, body, "tokens", "60")
	require.Contains(t, errorOf(t, body)["message"], "Limit 900, Used 900, Requested 300")
	hangUp()
	require.ErrorIs(t, <-failed, context.Canceled)
	s := e.idle()
	require.Equal(t, fakeprovider.Stats{Requests: 5, Served: 2, Limited: 2, Canceled: 1, TokensCharged: 600, MaxInFlight: 2,
		Paths: map[string]int64{chatPath: 5}}, s)
	release()
	resp, body = e.post(chatPath, `{"model":"gpt-4o"}`) // its hold was given back
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
}

// TestConcurrent: calls at once from many callers never take more than a
// minute's tokens: as many are served as the minute holds, and the rest
// are refused.
func TestConcurrent(t *testing.T) {
	e := newEnv(t, fakeprovider.Options{API: fakeprovider.OpenAI, TokensPerMinute: 10000, Usage: usageOf(100, 100)})
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			for range 4 {
				resp, body := e.post(chatPath, `{"model":"gpt-4o","stream":true}`)
				if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusTooManyRequests {
					t.Errorf("status %d: %s", resp.StatusCode, body)
				}
			}
		})
	}
	wg.Wait()
	s := e.idle()
	require.EqualValues(t, 50, s.Served)
	require.EqualValues(t, 150, s.Limited)
	require.EqualValues(t, 10000, s.TokensCharged)
	require.Zero(t, s.InFlight)
}
