package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore/pricing"
)

// receiver is a webhook on loopback that records what it is sent.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
	bad    []string // requests not as the webhook expects
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		switch {
		case err != nil:
			rc.bad = append(rc.bad, err.Error())
		case r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("User-Agent") != "ratestore-alert":
			rc.bad = append(rc.bad, fmt.Sprintf("%s %q %q", r.Method, r.Header.Get("Content-Type"), r.UserAgent()))
		}
		rc.bodies = append(rc.bodies, string(b))
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// got returns the bodies received, sorted, and fails t on a bad request.
func (rc *receiver) got(t *testing.T) []string {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Errorf("bad requests: %q", rc.bad)
	}
	return slices.Sorted(slices.Values(rc.bodies))
}

// sleeper is an Options.Sleep that records the delays and does not sleep.
type sleeper struct {
	mu     sync.Mutex
	delays []time.Duration
}

func (s *sleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeper) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.delays)
}

var quiet = slog.New(slog.DiscardHandler)

// start returns a Notifier of opts (URL, Log and Sleep filled in when
// unset), closed at the end of the test.
func start(t *testing.T, url string, opts Options) *Notifier {
	t.Helper()
	opts.URL = cmpOr(opts.URL, url)
	if opts.Log == nil {
		opts.Log = quiet
	}
	if opts.Sleep == nil {
		opts.Sleep = (&sleeper{}).sleep
	}
	n, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

// closeNow closes n, delivering everything, and fails t if that takes
// more than 5 s.
func closeNow(t *testing.T, n *Notifier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func checkStats(t *testing.T, n *Notifier, want Stats) {
	t.Helper()
	if got := n.Stats(); got != want {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// checkStates checks the crossings and the states of n, which do not
// depend on the sender's progress.
func checkStates(t *testing.T, n *Notifier, crossings, states int64) {
	t.Helper()
	if s := n.Stats(); s.Crossings != crossings || s.States != states {
		t.Errorf("Stats = %+v, want %d crossings and %d states", s, crossings, states)
	}
}

var resets = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// usage returns a window of 100k tokens and a budget of $5 at pct% used.
func usage(pct int64) []Level {
	return []Level{
		{Type: TypeWindow, Name: "window 5h0m0s", Limit: 100_000, Spent: pct * 1000, ResetsAt: resets},
		{Type: TypeBudget, Name: "budget 24h0m0s", Limit: int64(5 * pricing.Dollar),
			Spent: pct * int64(5*pricing.Dollar) / 100, ResetsAt: resets.Add(1500 * time.Millisecond)},
	}
}

func TestConcurrentCrossingsAlertOnce(t *testing.T) {
	rc := newReceiver(t)
	n := start(t, rc.srv.URL, Options{})
	steps := [][]Level{usage(70), usage(85), usage(101)}
	var wg sync.WaitGroup
	begin := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			<-begin
			for _, levels := range steps {
				n.Observe("key_1", "team_a", levels)
			}
		})
	}
	close(begin)
	wg.Wait()
	closeNow(t, n)
	want := []string{
		`{"type":"budget","threshold":0.8,"key":"key_1","team":"team_a","scope":"key","name":"budget 24h0m0s","limit":5,"spent":4.25,"resets_at":"2026-03-01T12:00:02Z"}`,
		`{"type":"budget","threshold":1,"key":"key_1","team":"team_a","scope":"key","name":"budget 24h0m0s","limit":5,"spent":5.05,"resets_at":"2026-03-01T12:00:02Z"}`,
		`{"type":"window","threshold":0.8,"key":"key_1","team":"team_a","scope":"key","name":"window 5h0m0s","limit":100000,"spent":85000,"resets_at":"2026-03-01T12:00:00Z"}`,
		`{"type":"window","threshold":1,"key":"key_1","team":"team_a","scope":"key","name":"window 5h0m0s","limit":100000,"spent":101000,"resets_at":"2026-03-01T12:00:00Z"}`,
	}
	if got := rc.got(t); !slices.Equal(got, want) {
		t.Errorf("received\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkStats(t, n, Stats{Crossings: 4, Sent: 4, States: 4})
}

// slowServer returns a webhook that answers 503, the first time only once
// release is closed, and a channel told when that first call arrives.
func slowServer(t *testing.T) (srv *httptest.Server, arrived <-chan struct{}, release func()) {
	unblock, called := make(chan struct{}), make(chan struct{}, 1)
	var calls atomic.Int64
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			called <- struct{}{}
			<-unblock
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	var once sync.Once
	release = func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(srv.Close)
	t.Cleanup(release) // runs first: a failed test must not hang srv.Close
	return srv, called, release
}

func TestSlowThenDownWebhook(t *testing.T) {
	srv, arrived, release := slowServer(t)
	sl := &sleeper{}
	n := start(t, srv.URL, Options{Queue: 4, Retries: 3, Backoff: time.Second, MaxBackoff: 3 * time.Second, Sleep: sl.sleep})

	window := func(pct int64) []Level {
		return []Level{{Type: TypeWindow, Name: "window 5h0m0s", Limit: 1000, Spent: pct * 10}}
	}
	n.Observe("key_first", "", window(90))
	select {
	case <-arrived: // the sender is now blocked in the receiver
	case <-time.After(5 * time.Second):
		t.Fatal("the webhook was not called")
	}
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key_%d", i)
	}
	below, above := window(50), window(95)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i, k := range keys {
			if i%100 == 0 {
				n.Observe(k, "", above) // 100 crossings: 4 queued, 96 dropped
			} else {
				n.Observe(k, "", below)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Observe waited for the blocked webhook")
	}
	checkStats(t, n, Stats{Crossings: 101, Dropped: 96, States: 101})

	release()
	srv.Close() // down: every later attempt is refused
	closeNow(t, n)
	checkStats(t, n, Stats{Crossings: 101, Dropped: 96, Failed: 5, Retries: 15, States: 101})
	delays := sl.got()
	if len(delays) != 15 {
		t.Fatalf("slept %d times, want 15: %v", len(delays), delays)
	}
	for i, d := range delays {
		want := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}[i%3]
		if d > want || d < want-want/10 {
			t.Errorf("delay %d = %v, want %v less at most 10%%", i, d, want)
		}
	}
}

func TestRetryThenDelivered(t *testing.T) {
	var calls atomic.Int64
	rc := newReceiver(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) <= 2 {
			http.Error(w, "try later", http.StatusTooManyRequests)
			return
		}
		rc.srv.Config.Handler.ServeHTTP(w, r)
	}))
	defer srv.Close()
	sl := &sleeper{}
	n := start(t, srv.URL, Options{Sleep: sl.sleep})
	n.Observe("key_1", "", usage(100)[:1])
	closeNow(t, n)
	if got := rc.got(t); len(got) != 2 {
		t.Errorf("received %q, want the 0.8 and 1.0 alerts", got)
	}
	checkStats(t, n, Stats{Crossings: 2, Sent: 2, Retries: 2, States: 2})
	if d := sl.got(); len(d) != 2 || d[0] > time.Second || d[1] > 2*time.Second || d[1] < 1800*time.Millisecond {
		t.Errorf("delays %v, want about 1s, 2s", d)
	}
}

func TestCloseAbandonsWhenCtxEnds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	waiting := make(chan struct{}, 1)
	n := start(t, srv.URL, Options{Sleep: func(ctx context.Context, d time.Duration) error {
		select {
		case waiting <- struct{}{}:
		default:
		}
		<-ctx.Done() // a retry that would wait for good
		return ctx.Err()
	}})
	n.Observe("key_1", "", usage(100)) // 4 crossings
	<-waiting
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := n.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want the deadline", err)
	}
	checkStats(t, n, Stats{Crossings: 4, Failed: 1, Dropped: 3, States: 4})
	n.Observe("key_2", "", usage(100))
	checkStats(t, n, Stats{Crossings: 8, Failed: 1, Dropped: 7, States: 8})
	if err := n.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestCalendarPeriodOncePerPeriod(t *testing.T) {
	rc := newReceiver(t)
	n := start(t, rc.srv.URL, Options{Thresholds: []float64{0.8}})
	paris := time.FixedZone("CET", 3600)
	feb, mar := time.Date(2026, 3, 1, 0, 0, 0, 0, paris), time.Date(2026, 4, 1, 0, 0, 0, 0, paris)
	month := func(dollars int64, end time.Time) []Level {
		return []Level{{Type: TypeBudget, Name: "budget month Europe/Paris", Period: true,
			Limit: int64(500 * pricing.Dollar), Spent: dollars * int64(pricing.Dollar), ResetsAt: end}}
	}
	for _, l := range [][]Level{
		month(410, feb), // fires
		month(450, feb),
		month(300, feb), // a refund within the period does not re-arm it
		month(420, feb),
		month(100, mar), // the next period: re-armed
		month(401, mar), // fires
		month(402, mar),
	} {
		n.Observe("key_1", "", l)
	}
	closeNow(t, n)
	want := []string{
		`{"type":"budget","threshold":0.8,"key":"key_1","scope":"key","name":"budget month Europe/Paris","limit":500,"spent":401,"resets_at":"2026-04-01T00:00:00+01:00"}`,
		`{"type":"budget","threshold":0.8,"key":"key_1","scope":"key","name":"budget month Europe/Paris","limit":500,"spent":410,"resets_at":"2026-03-01T00:00:00+01:00"}`,
	}
	if got := rc.got(t); !slices.Equal(got, want) {
		t.Errorf("received\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A period seen first over its threshold fires too.
	n2 := start(t, rc.srv.URL, Options{Thresholds: []float64{0.8}})
	n2.Observe("key_1", "", month(450, feb))
	n2.Observe("key_1", "", month(450, mar))
	checkStates(t, n2, 2, 1)
}

// clock is an Options.Now that moves when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestRollingWindowRearms(t *testing.T) {
	rc := newReceiver(t)
	clk := &clock{now: resets}
	n := start(t, rc.srv.URL, Options{Now: clk.Now})
	window := func(tokens int64) []Level {
		return []Level{{Type: TypeWindow, Name: "window 5h0m0s", Limit: 1000, Spent: tokens,
			ResetsAt: resets.Add(time.Duration(tokens) * time.Second)}}
	}
	for _, tokens := range []int64{850, 900, 1000, 1200} { // 0.8 then 1.0
		n.Observe("key_1", "", window(tokens))
	}
	checkStates(t, n, 2, 2)
	n.Observe("key_1", "", window(700)) // a request that finished before, observed late
	checkStates(t, n, 2, 2)
	clk.advance(DefaultRearm)
	n.Observe("key_1", "", window(900)) // below 1.0 a minute later: re-armed
	checkStates(t, n, 2, 1)
	n.Observe("key_1", "", window(500)) // below 0.8, but seen above just now
	checkStates(t, n, 2, 1)
	clk.advance(DefaultRearm)
	n.Observe("key_1", "", window(500)) // below 0.8 a minute later: re-armed
	checkStates(t, n, 2, 0)
	n.Observe("key_1", "", window(799))
	n.Observe("key_1", "", window(800)) // fires again
	checkStates(t, n, 3, 1)
	closeNow(t, n)
	got := rc.got(t)
	if len(got) != 3 || !strings.Contains(got[0], `"threshold":0.8,`) || !strings.Contains(got[0], `"spent":800,`) ||
		!strings.Contains(got[1], `"spent":850,`) || !strings.Contains(got[2], `"threshold":1,`) ||
		!strings.Contains(got[2], `"spent":1000,`) {
		t.Errorf("received\n%s", strings.Join(got, "\n"))
	}
	checkStats(t, n, Stats{Crossings: 3, Sent: 3, States: 1})
}

func TestTeamLimitOncePerTeam(t *testing.T) {
	rc := newReceiver(t)
	n := start(t, rc.srv.URL, Options{Thresholds: []float64{0.8}})
	levels := func(pct int64) []Level {
		return []Level{
			{Type: TypeBudget, Name: "budget 24h0m0s", Team: true, Limit: int64(pricing.Dollar), Spent: pct * int64(pricing.Cent)},
			{Type: TypeBudget, Name: "budget 24h0m0s", Limit: int64(pricing.Dollar), Spent: pct * int64(pricing.Cent)},
		}
	}
	n.Observe("key_a", "team_x", levels(81))
	n.Observe("key_b", "team_x", levels(82)) // the team's alert is sent already
	n.Observe("key_c", "team_y", levels(83))
	n.Observe("key_d", "", levels(84)) // no team: its team level is ignored
	closeNow(t, n)
	want := []string{
		`{"type":"budget","threshold":0.8,"key":"key_a","team":"team_x","scope":"key","name":"budget 24h0m0s","limit":1,"spent":0.81}`,
		`{"type":"budget","threshold":0.8,"key":"key_a","team":"team_x","scope":"team","name":"budget 24h0m0s","limit":1,"spent":0.81}`,
		`{"type":"budget","threshold":0.8,"key":"key_b","team":"team_x","scope":"key","name":"budget 24h0m0s","limit":1,"spent":0.82}`,
		`{"type":"budget","threshold":0.8,"key":"key_c","team":"team_y","scope":"key","name":"budget 24h0m0s","limit":1,"spent":0.83}`,
		`{"type":"budget","threshold":0.8,"key":"key_c","team":"team_y","scope":"team","name":"budget 24h0m0s","limit":1,"spent":0.83}`,
		`{"type":"budget","threshold":0.8,"key":"key_d","scope":"key","name":"budget 24h0m0s","limit":1,"spent":0.84}`,
	}
	if got := rc.got(t); !slices.Equal(got, want) {
		t.Errorf("received\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestBadOptions(t *testing.T) {
	for _, tc := range []struct {
		field string
		opts  Options
	}{
		{"URL", Options{}},
		{"URL", Options{URL: "ftp://example.com/hook"}},
		{"URL", Options{URL: "http://"}},
		{"URL", Options{URL: "http://a b/%zz"}},
		{"Thresholds[0]", Options{Thresholds: []float64{0}}},
		{"Thresholds[1]", Options{Thresholds: []float64{0.5, -1}}},
		{"Thresholds[0]", Options{Thresholds: []float64{10.01}}},
		{"Thresholds[0]", Options{Thresholds: []float64{math.NaN()}}},
		{"Thresholds[0]", Options{Thresholds: []float64{math.Inf(1)}}},
		{"Thresholds[0]", Options{Thresholds: []float64{0.0004}}},
		{"Queue", Options{Queue: -1}},
		{"Retries", Options{Retries: -1}},
		{"Backoff", Options{Backoff: -time.Second}},
		{"MaxBackoff", Options{MaxBackoff: -time.Second}},
		{"MaxBackoff", Options{Backoff: time.Minute, MaxBackoff: time.Second}},
		{"MaxBackoff", Options{Backoff: 10 * time.Minute}}, // above the default MaxBackoff
		{"MaxStates", Options{MaxStates: -1}},
		{"Rearm", Options{Rearm: -time.Second}},
	} {
		if tc.opts.URL == "" && tc.field != "URL" {
			tc.opts.URL = "https://hooks.example.com/x"
		}
		n, err := New(tc.opts)
		if n != nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "Options."+tc.field+":") {
			t.Errorf("New(%+v) = %v, %v; want an error naming %s and matching ErrInvalid", tc.opts, n, err, tc.field)
		}
	}
	_, err := New(Options{URL: "ftp://user:secret@hooks.example.com/x", Thresholds: []float64{0.8}})
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("New with a password: %v, want an error not quoting it", err)
	}
}

func TestDefaults(t *testing.T) {
	n, err := New(Options{URL: "https://hooks.example.com/x", Thresholds: []float64{1, 0.5, 0.5004, 10}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(context.Background())
	if !slices.Equal(n.permille, []int64{500, 1000, 10000}) || n.retries != DefaultRetries ||
		cap(n.queue) != DefaultQueue || n.backoff != time.Second || n.maxBackoff != 5*time.Minute ||
		n.client.Timeout != 10*time.Second || n.log != slog.Default() || n.maxStates != DefaultMaxStates {
		t.Errorf("defaults not applied: %+v", n)
	}
	d := []float64{}
	for i := range 10 {
		d = append(d, double(time.Second<<i, 5*time.Minute).Seconds())
	}
	if want := []float64{2, 4, 8, 16, 32, 64, 128, 256, 300, 300}; !slices.Equal(d, want) {
		t.Errorf("doubling: %v, want %v", d, want)
	}
	if got := double(math.MaxInt64/2+1, math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("double overflows: %v", got)
	}
}

func TestReachesIsExact(t *testing.T) {
	const maxI = math.MaxInt64
	for _, tc := range []struct {
		spent, limit, permille int64
		want                   bool
	}{
		{2, 3, 800, false}, // 2.4 tokens is the threshold
		{3, 3, 800, true},
		{2399, 3000, 800, false},
		{2400, 3000, 800, true},
		{0, 1, 1, false},
		{-5, 1, 1, false},
		{1, 1000, 1, true},
		{maxI - 1, maxI, 1000, false},
		{maxI, maxI, 1000, true},
		{maxI, maxI / 10, 10000, true},
		{maxI / 10, maxI / 10 * 10, 1000, false},
		{4_000_000_000, 5_000_000_000, 800, true}, // $4 of $5
		{3_999_999_999, 5_000_000_000, 800, false},
	} {
		if got := reaches(tc.spent, tc.limit, tc.permille); got != tc.want {
			t.Errorf("reaches(%d, %d, %d‰) = %v, want %v", tc.spent, tc.limit, tc.permille, got, tc.want)
		}
	}
}

func TestMaxStatesBoundsMemory(t *testing.T) {
	n := start(t, "http://127.0.0.1:1/", Options{MaxStates: 8, Queue: 100, Retries: 1, Thresholds: []float64{0.5}})
	for i := range 20 {
		n.Observe(fmt.Sprint("key_", i), "", usage(60)[:1])
	}
	if s := n.Stats(); s.States != 8 || s.Evicted != 12 || s.Crossings != 20 {
		t.Errorf("Stats = %+v, want 8 states, 12 evicted, 20 crossings", s)
	}
	total := 0
	for i := range n.shards {
		total += len(n.shards[i].m)
	}
	if total != 8 {
		t.Errorf("%d states in the shards, want 8", total)
	}

	var sh shard
	sh.m = map[stateKey]state{
		{subject: "old"}:     {seq: 1},
		{subject: "new"}:     {seq: 3, resetsAt: time.Now().Add(time.Hour)},
		{subject: "expired"}: {seq: 2, resetsAt: time.Now().Add(-time.Hour)},
	}
	if k, ok := sh.victim(time.Now()); !ok || k.subject != "expired" {
		t.Errorf("victim %q, want the expired state", k.subject)
	}
	delete(sh.m, stateKey{subject: "expired"})
	if k, ok := sh.victim(time.Now()); !ok || k.subject != "old" {
		t.Errorf("victim %q, want the oldest state", k.subject)
	}
}

func TestIgnoredLevelsAndNil(t *testing.T) {
	n := start(t, "http://127.0.0.1:1/", Options{})
	n.Observe("key_1", "", []Level{
		{Type: "money", Name: "x", Limit: 1, Spent: 2},
		{Type: TypeWindow, Name: "x", Limit: 0, Spent: 2},
		{Type: TypeWindow, Name: "x", Limit: -1, Spent: 2},
		{Type: TypeWindow, Name: "x", Team: true, Limit: 1, Spent: 2},
	})
	n.Observe("", "", usage(200))
	n.Observe("key_1", "", nil)
	checkStats(t, n, Stats{})

	var none *Notifier
	none.Observe("key_1", "team", usage(200))
	if none.Stats() != (Stats{}) || none.Close(context.Background()) != nil {
		t.Error("a nil Notifier does something")
	}
}

func TestLogs(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	n := start(t, "http://127.0.0.1:1/", Options{Log: log, Retries: 1, Thresholds: []float64{0.8}})
	n.Observe("key_1", "team_a", usage(90)[1:])
	closeNow(t, n)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("logged %q, want a warning and an error", lines)
	}
	var warn, fail map[string]any
	if err := errors.Join(json.Unmarshal([]byte(lines[0]), &warn), json.Unmarshal([]byte(lines[1]), &fail)); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"level": "WARN", "msg": "alert: threshold reached", "type": "budget", "threshold": 0.8,
		"key": "key_1", "team": "team_a", "team_limit": false, "name": "budget 24h0m0s", "limit": 5.0, "spent": 4.5,
		"resets_at": "2026-03-01T12:00:01.5Z"}
	for k, v := range want {
		if warn[k] != v {
			t.Errorf("warning %s = %v, want %v", k, warn[k], v)
		}
	}
	if fail["level"] != "ERROR" || fail["msg"] != "alert: not delivered" || fail["attempts"] != 2.0 || fail["key"] != "key_1" {
		t.Errorf("failure logged as %v", fail)
	}
}

func TestAlertJSON(t *testing.T) {
	b, err := json.Marshal(Alert{Type: TypeWindow, Threshold: 1, Key: "k", Name: "w", Limit: 10, Spent: 12})
	if want := `{"type":"window","threshold":1,"key":"k","scope":"key","name":"w","limit":10,"spent":12}`; err != nil || string(b) != want {
		t.Errorf("Marshal = %s, %v; want %s", b, err, want)
	}
	a := Alert{Type: TypeBudget, Threshold: 0.95, Key: "k", Team: "t", TeamLimit: true, Name: "b",
		Limit: 1, Spent: -1, ResetsAt: time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC)}
	b, err = json.Marshal(a)
	want := `{"type":"budget","threshold":0.95,"key":"k","team":"t","scope":"team","name":"b","limit":0.000000001,"spent":-0.000000001,"resets_at":"2026-01-02T03:04:06Z"}`
	if err != nil || string(b) != want {
		t.Errorf("Marshal = %s, %v; want %s", b, err, want)
	}
}

func TestDefaultSleepHonorsCtx(t *testing.T) {
	if err := sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("sleep = %v, want canceled", err)
	}
}

func BenchmarkObserveNoCrossing(b *testing.B) {
	for _, armed := range []bool{false, true} {
		b.Run(fmt.Sprintf("armed=%v", armed), func(b *testing.B) {
			n, err := New(Options{URL: "http://127.0.0.1:1/", Log: quiet, Retries: 1, Sleep: (&sleeper{}).sleep})
			if err != nil {
				b.Fatal(err)
			}
			defer n.Close(context.Background())
			if armed {
				n.Observe("key_other", "", usage(90))
			}
			levels := usage(50)
			b.ReportAllocs()
			for b.Loop() {
				n.Observe("key_1", "team_a", levels)
			}
		})
	}
}
