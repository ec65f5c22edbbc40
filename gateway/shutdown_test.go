package gateway

import (
	"bufio"
	"context"
	"log/slog"
	"net/http"
	"testing"

	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/stretchr/testify/require"
)

// TestWaitAbort: Wait returns at once when nothing is served and waits for
// a stream in flight until its context ends; Abort ends the stream's
// upstream request, which is then charged its estimate, and Wait returns
// once its usage is recorded, even with the caller gone.
func TestWaitAbort(t *testing.T) {
	var logs logbuf.Buffer
	e := newEnv(t, Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	k, secret := e.key("k", 1e6)
	require.NoError(t, e.gw.Wait(context.Background()))

	q := fakeReq{Model: "gpt-4o", MaxTokens: 100, Stream: true, Gate: true, Input: 11, Output: 29}
	ctx, hangUp := context.WithCancel(context.Background())
	resp, err := e.client.Do(e.request("POST", "/v1/chat/completions", secret, q).WithContext(ctx))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	firstEvent(t, bufio.NewReader(resp.Body))
	hangUp() // the caller goes; the gateway drains the upstream for the usage
	resp.Body.Close()

	done, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, e.gw.Wait(done), context.Canceled)
	require.Equal(t, 1, e.usage(k.ID).InFlight)

	e.gw.Abort()
	require.NoError(t, e.gw.Wait(context.Background()))
	u := e.usage(k.ID)
	require.Zero(t, u.InFlight)
	require.Equal(t, reserveOf(t, q, 100), u.Used)
	require.Contains(t, logs.String(), "no usage read: charging the estimate")
	require.NotContains(t, logs.String(), `"level":"ERROR"`)
	<-e.served

	// Served after Abort: the upstream request fails at once.
	resp, body := e.call("POST", "/v1/chat/completions", secret, fakeReq{Input: 1})
	require.Equal(t, http.StatusBadGateway, resp.StatusCode, string(body))
	require.EqualValues(t, 1, e.up.hits.Load(), "only the stream reached the upstream")
}
