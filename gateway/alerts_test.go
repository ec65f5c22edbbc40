package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/alert"
	"github.com/ratestore/ratestore/keystore"
)

// receiver is a webhook on loopback that records the alerts it is sent,
// and can be made slow (every call waits until released) or down.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []map[string]any
	release chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	rc := &receiver{release: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-rc.release
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		if json.Unmarshal(b, &m) == nil {
			rc.mu.Lock()
			rc.got = append(rc.got, m)
			rc.mu.Unlock()
		}
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) alerts() []map[string]any {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]map[string]any(nil), rc.got...)
}

// TestAlertsOncePerCrossing: 64 concurrent requests take a key and its
// team past 80% of their token windows while the webhook hangs; every
// request is served meanwhile, and exactly one alert per threshold and
// limit arrives once it answers. Past 100% with the webhook down, the
// alerts are retried with backoff, then counted failed in /metrics.
func TestAlertsOncePerCrossing(t *testing.T) {
	rc := newReceiver(t)
	var mu sync.Mutex
	var delays []time.Duration
	n, err := alert.New(alert.Options{URL: rc.srv.URL, Retries: 3, Sleep: func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		delays = append(delays, d)
		mu.Unlock()
		return nil
	}})
	require.NoError(t, err)
	t.Cleanup(func() { n.Close(context.Background()) })
	up := scripted(t, "application/json", `{"usage":{"prompt_tokens":40,"completion_tokens":10}}`) // 50 tokens
	e := newEnv(t, Options{Upstream: up, Alerts: n})
	window := []keystore.Window{{Limit: 4000, Window: 5 * time.Hour}}
	team, err := e.keys().CreateTeam(context.Background(), keystore.TeamSpec{Name: "a", Policy: keystore.Policy{Windows: window}})
	require.NoError(t, err)
	k, secret, err := e.keys().Create(context.Background(), keystore.Spec{Name: "k", Team: team.ID, Policy: keystore.Policy{Windows: window}})
	require.NoError(t, err)
	req := map[string]any{"model": "gpt-4o", "max_tokens": 10, "messages": []any{}}

	// 64 requests of 50 tokens: 3200 of 4000, 80%, with the webhook hung.
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			resp, b, err := e.try(e.request("POST", "/v1/chat/completions", secret, req))
			if err == nil && resp.StatusCode != http.StatusOK {
				t.Errorf("%d %s", resp.StatusCode, b)
			}
		})
	}
	wg.Wait() // served while the webhook hangs: alerts never slow requests
	close(rc.release)
	require.Eventually(t, func() bool { return n.Stats().Sent == 2 }, 10*time.Second, time.Millisecond)
	got := rc.alerts()
	require.Len(t, got, 2, "one alert for the key's window and one for the team's: %v", got)
	for _, a := range got {
		require.Equal(t, "window", a["type"])
		require.Equal(t, 0.8, a["threshold"])
		require.Equal(t, k.ID, a["key"])
		require.Equal(t, team.ID, a["team"])
		require.EqualValues(t, 4000, a["limit"])
		require.GreaterOrEqual(t, a["spent"], 3200.0)
	}

	// The webhook goes down; 16 more requests reach 4000, 100%.
	rc.srv.Close()
	for range 16 {
		resp, b := e.call("POST", "/v1/chat/completions", secret, req)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	}
	require.Eventually(t, func() bool { return n.Stats().Failed == 2 }, 10*time.Second, time.Millisecond)
	s := n.Stats()
	require.Equal(t, int64(4), s.Crossings)
	require.Equal(t, int64(6), s.Retries, "3 retries for each of the 2 alerts")
	mu.Lock()
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}, roundDelays(delays[:3]), "exponential backoff")
	mu.Unlock()
	m := e.scrape()
	require.Equal(t, 2.0, m.series("ratestore_alerts_total")[`{outcome="failed"}`])
	require.Equal(t, 2.0, m.series("ratestore_alerts_total")[`{outcome="sent"}`])
}

// roundDelays rounds each delay up to the second: the backoff's jitter
// only shortens it, by up to 10%.
func roundDelays(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = (d + time.Second - 1).Truncate(time.Second)
	}
	return out
}
