package console

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeclock"
	"github.com/ratestore/ratestore/internal/logbuf"
)

// logLines parses a JSON log into its lines.
func logLines(t *testing.T, logs *logbuf.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		lines = append(lines, m)
	}
	return lines
}

// tokensLogged is the number of tokens the lines account for: a line
// each, or the counts of a summary.
func tokensLogged(lines []map[string]any) int {
	n := 0
	for _, l := range lines {
		w, ok := l["wrong"].(float64)
		if !ok {
			n++
			continue
		}
		r, _ := l["refused"].(float64)
		n += int(w + r)
	}
	return n
}

// TestWrongTokenLog: 1000 wrong tokens from one address, one every 100
// ms, are a handful of lines, two a minute at most: the first of each
// minute at once, the rest counted; together they account for every
// token, and none names the token.
func TestWrongTokenLog(t *testing.T) {
	clock := fakeclock.New(t0)
	var logs logbuf.Buffer
	c := newConsole(t, Options{Now: clock.Now, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	const guess = "wrong-guess-0123456789"
	for range 1000 {
		authorize(c, "GET", "192.0.2.1:1", "Bearer "+guess, "", "")
		clock.Advance(100 * time.Millisecond)
	}
	clock.Advance(2 * FailureWindow)
	authorize(c, "GET", "192.0.2.2:1", "Bearer "+token, "", "") // any attempt writes what is due
	lines := logLines(t, &logs)
	require.LessOrEqual(t, len(lines), 2*(100/60+1), "%s", logs.String())
	require.Equal(t, 1000, tokensLogged(lines), "%s", logs.String())
	require.Equal(t, "console: wrong admin token", lines[0]["msg"])
	require.Equal(t, "192.0.2.1", lines[0]["client"])
	require.Equal(t, "/admin/keys", lines[0]["path"])
	require.Equal(t, map[string]any{"time": lines[1]["time"], "level": "WARN", "msg": "console: wrong admin tokens from one address in a minute",
		"client": "192.0.2.1", "wrong": float64(MaxFailures - 1), "refused": float64(600 - MaxFailures), "since": "2026-11-26T12:00:00Z"}, lines[1])
	require.NotContains(t, logs.String(), guess)
}

// TestWrongTokenLogFull: the wrong tokens the full table does not count
// are logged the same way, as one address.
func TestWrongTokenLogFull(t *testing.T) {
	clock := fakeclock.New(t0)
	var logs logbuf.Buffer
	c := newConsole(t, Options{Now: clock.Now, MaxAddresses: 2, Log: slog.New(slog.NewJSONHandler(&logs, nil))})
	for i := range 1000 {
		authorize(c, "GET", fmt.Sprintf("10.0.%d.%d:1", i/250, i%250), "Bearer wrong", "", "")
		clock.Advance(10 * time.Millisecond)
	}
	clock.Advance(2 * FailureWindow)
	authorize(c, "GET", "192.0.2.2:1", "Bearer "+token, "", "")
	lines := logLines(t, &logs)
	require.Equal(t, 1000, tokensLogged(lines), "%s", logs.String())
	require.Len(t, lines, 4, "a line for each of the two addresses, and the uncounted's at once and of counts: %s", logs.String())
	require.Equal(t, "console: wrong admin token, not counted: too many addresses have sent wrong tokens this minute", lines[2]["msg"])
	require.Equal(t, float64(2), lines[2]["addresses"])
}
