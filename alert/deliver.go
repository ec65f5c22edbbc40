package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// Alert is a threshold crossed, as sent to the webhook.
type Alert struct {
	Type      string  // TypeBudget or TypeWindow
	Threshold float64 // the fraction of Limit reached, rounded to permille: 0.8
	Key       string  // the key whose request crossed it
	Team      string  // the key's team; "": none
	TeamLimit bool    // the limit crossed is the team's, not the key's
	Name      string  // the limit's name
	// Limit and Spent are tokens, or pricing.USD nano-dollars for a
	// budget; Spent as the crossing request left it.
	Limit, Spent int64
	ResetsAt     time.Time // when the window or period resets; zero: unknown
}

// alertJSON is an Alert's JSON shape.
type alertJSON struct {
	Type      string  `json:"type"`
	Threshold float64 `json:"threshold"`
	Key       string  `json:"key"`
	Team      string  `json:"team,omitempty"`
	Scope     string  `json:"scope"`
	Name      string  `json:"name"`
	Limit     any     `json:"limit"`
	Spent     any     `json:"spent"`
	ResetsAt  string  `json:"resets_at,omitempty"`
}

// MarshalJSON writes a as the webhook receives it: snake_case fields;
// "team" absent when the key has none; "scope" "team" for a team's limit,
// else "key"; a window's limit and spent in whole tokens, a budget's in
// USD as exact decimals (4.25); "resets_at" in RFC 3339, rounded up to
// the second (never before the reset), absent when unknown.
func (a Alert) MarshalJSON() ([]byte, error) {
	j := alertJSON{
		Type: a.Type, Threshold: a.Threshold, Key: a.Key, Team: a.Team,
		Scope: "key", Name: a.Name, Limit: a.Limit, Spent: a.Spent,
	}
	if a.TeamLimit {
		j.Scope = "team"
	}
	if a.Type == TypeBudget {
		j.Limit, j.Spent = pricing.USD(a.Limit), pricing.USD(a.Spent)
	}
	if !a.ResetsAt.IsZero() {
		j.ResetsAt = ceilSecond(a.ResetsAt).Format(time.RFC3339)
	}
	return json.Marshal(j)
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

// attrs are a's log attributes.
func (a *Alert) attrs() []slog.Attr {
	limit, spent := slog.Int64("limit", a.Limit), slog.Int64("spent", a.Spent)
	if a.Type == TypeBudget {
		limit, spent = slog.Any("limit", pricing.USD(a.Limit)), slog.Any("spent", pricing.USD(a.Spent))
	}
	attrs := []slog.Attr{
		slog.String("type", a.Type), slog.Float64("threshold", a.Threshold),
		slog.String("key", a.Key), slog.String("team", a.Team), slog.Bool("team_limit", a.TeamLimit),
		slog.String("name", a.Name), limit, spent,
	}
	if !a.ResetsAt.IsZero() {
		attrs = append(attrs, slog.Time("resets_at", a.ResetsAt))
	}
	return attrs
}

// run sends the queue, in order, until Close; then what it still holds.
func (n *Notifier) run() {
	defer close(n.done)
	for {
		select {
		case a := <-n.queue:
			n.handle(&a)
		case <-n.closing:
			for {
				select {
				case a := <-n.queue:
					n.handle(&a)
				default:
					return
				}
			}
		}
	}
}

// handle delivers a, or drops it once Close's ctx has ended.
func (n *Notifier) handle(a *Alert) {
	if n.ctx.Err() != nil {
		n.dropped.Add(1)
		n.log.LogAttrs(context.Background(), slog.LevelError, "alert: dropped at close", a.attrs()...)
		return
	}
	n.deliver(a)
}

// deliver POSTs a, retrying with backoff. A panic (of an injected Client
// or Sleep) fails a instead of the program.
func (n *Notifier) deliver(a *Alert) {
	defer func() {
		if r := recover(); r != nil {
			n.giveUp(a, 0, fmt.Errorf("panic: %v", r))
		}
	}()
	body, err := json.Marshal(a)
	if err != nil {
		n.giveUp(a, 0, err)
		return
	}
	delay := n.backoff
	for attempt := 0; ; attempt++ {
		err := n.post(body)
		if err == nil {
			n.sent.Add(1)
			return
		}
		if attempt == n.retries || n.ctx.Err() != nil {
			n.giveUp(a, attempt+1, err)
			return
		}
		n.log.LogAttrs(n.ctx, slog.LevelDebug, "alert: webhook failed, retrying",
			slog.String("key", a.Key), slog.String("name", a.Name), slog.Int("attempt", attempt+1),
			slog.Duration("after", delay), slog.Any("error", err))
		if serr := n.sleep(n.ctx, jitter(delay)); serr != nil {
			n.giveUp(a, attempt+1, err)
			return
		}
		n.retried.Add(1)
		delay = double(delay, n.maxBackoff)
	}
}

// giveUp counts and logs a as failed after attempts, err the last error.
func (n *Notifier) giveUp(a *Alert, attempts int, err error) {
	n.failed.Add(1)
	attrs := append(a.attrs(), slog.Int("attempts", attempts), slog.Any("error", err))
	n.log.LogAttrs(context.Background(), slog.LevelError, "alert: not delivered", attrs...)
}

// jitter returns d shortened by a random 0 to 10%, so that alerts that
// failed together do not all retry at once.
func jitter(d time.Duration) time.Duration {
	if d < 10 {
		return d
	}
	return d - rand.N(d/10+1)
}

// double returns 2d, at most limit, without overflow.
func double(d, limit time.Duration) time.Duration {
	if d > limit/2 {
		return limit
	}
	return 2 * d
}

// post sends body once; nil means a 2xx answer.
func (n *Notifier) post(body []byte) error {
	req, err := http.NewRequestWithContext(n.ctx, http.MethodPost, n.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "ratestore-alert")
	resp, err := n.client.Do(req) // its errors quote the URL without its password
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // to reuse the connection
		return nil
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	return fmt.Errorf("webhook answered %s: %q", resp.Status, snippet)
}
