package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/backendtest"
	"github.com/ratestore/ratestore/internal/fakeclock"
)

var (
	ctx = context.Background()
	t0  = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
)

// env is an audit log on a store of the backend matrix, with a fake clock.
type env struct {
	t     *testing.T
	clock *fakeclock.Clock
	log   *audit.Log
	// scans counts the records the log's ScanFroms have read.
	scans *counter
	// records lists every record under prefix.
	records func(prefix string) map[string][]byte
	// put stores a record as it is, behind the log's back.
	put func(key string, v []byte)
}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add(n int) { c.mu.Lock(); c.n += n; c.mu.Unlock() }

// take returns the count and resets it.
func (c *counter) take() int { c.mu.Lock(); defer c.mu.Unlock(); n := c.n; c.n = 0; return n }

// counting is a store whose ScanFrom counts the records it reads.
type counting struct {
	backend.Store
	c *counter
}

func (s counting) ScanFrom(ctx context.Context, prefix, start []byte, fn func(k, v []byte) error) error {
	return s.Store.ScanFrom(ctx, prefix, start, func(k, v []byte) error {
		s.c.add(1)
		return fn(k, v)
	})
}

func forEach(t *testing.T, opts audit.Options, f func(t *testing.T, e *env)) {
	backendtest.Run(t, backendtest.All(), func(t *testing.T, b backendtest.Backend) {
		f(t, open(t, b, opts))
	})
}

// open returns an env on a new store of b.
func open(t *testing.T, b backendtest.Backend, opts audit.Options) *env {
	e := &env{t: t, clock: fakeclock.New(t0), scans: &counter{}}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = -1 // the tests sweep when they mean to
	}
	bind(e, b.Open(t, e.clock).Store, opts)
	return e
}

func bind(e *env, db backend.Store, opts audit.Options) {
	l, err := audit.Open(counting{db, e.scans}, opts)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { require.NoError(e.t, l.Close(ctx)) })
	e.log = l
	e.records = func(prefix string) map[string][]byte {
		out := map[string][]byte{}
		require.NoError(e.t, db.Scan(ctx, []byte(prefix), func(k, v []byte) error {
			out[string(k)] = v
			return nil
		}))
		return out
	}
	e.put = func(key string, v []byte) {
		require.NoError(e.t, db.Update(ctx, nil, func(b backend.Batch) error { return b.Put([]byte(key), v) }))
	}
}

// record records an event of target by actor, changing name from i-1 to
// i, a second after the last.
func (e *env) record(actor, target string, i int) audit.Event {
	e.t.Helper()
	e.clock.Advance(time.Second)
	ev, err := e.log.Record(ctx, audit.Event{Actor: actor, Action: "key.update", Target: target,
		Changes: map[string]audit.Change{"name": {From: jsonOf(fmt.Sprint(i - 1)), To: jsonOf(fmt.Sprint(i))}}})
	require.NoError(e.t, err)
	return ev
}

func jsonOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// all pages through q, limit events a page, and returns every event.
func (e *env) all(q audit.Query) []audit.Event {
	e.t.Helper()
	var out []audit.Event
	for range 10_000 {
		p, err := e.log.Events(ctx, q)
		require.NoError(e.t, err)
		out = append(out, p.Events...)
		if p.Next == "" {
			return out
		}
		require.NotEmpty(e.t, p.Events, "a page with a next holds an event")
		q.Cursor = p.Next
	}
	e.t.Fatal("pages do not end")
	return nil
}

// newestFirst returns es reversed.
func newestFirst(es []audit.Event) []audit.Event {
	out := make([]audit.Event, len(es))
	for i, ev := range es {
		out[len(es)-1-i] = ev
	}
	return out
}

// TestRecordAndPages: events come back newest first, as recorded, a page
// at a time; the last page has no cursor; an event recorded in the same
// instant as another is a place of its own.
func TestRecordAndPages(t *testing.T) {
	forEach(t, audit.Options{}, func(t *testing.T, e *env) {
		var want []audit.Event
		for i := range 10 {
			want = append(want, e.record("admin-token", "key_0123456789abcdef", i))
		}
		same, err := e.log.Record(ctx, audit.Event{Actor: "cli", Action: "prices.reload", Target: "prices", Address: "127.0.0.1"})
		require.NoError(t, err)
		require.Equal(t, e.clock.Now(), same.Time)
		require.Equal(t, map[string]audit.Change{}, same.Changes)
		want = newestFirst(append(want, same))
		for _, limit := range []int{1, 3, 11, 100} {
			require.Equal(t, want, e.all(audit.Query{Limit: limit}), "limit %d", limit)
		}
		p, err := e.log.Events(ctx, audit.Query{Limit: 11})
		require.NoError(t, err)
		require.Empty(t, p.Next, "no event after the last: no cursor")
		p, err = e.log.Events(ctx, audit.Query{})
		require.NoError(t, err)
		require.Len(t, p.Events, 11, "the default limit is 100")
		b, err := json.Marshal(p.Events[1])
		require.NoError(t, err)
		require.JSONEq(t, `{"time":"2026-11-28T09:00:10Z","actor":"admin-token","action":"key.update","target":"key_0123456789abcdef",
			"changes":{"name":{"from":"8","to":"9"}}}`, string(b))
	})
}

// TestTarget: a target's events alone, newest first, read without reading
// any other target's: a page of the one event of a quiet key reads its
// record and nothing of the thousand of a busy one.
func TestTarget(t *testing.T) {
	forEach(t, audit.Options{}, func(t *testing.T, e *env) {
		quiet := e.record("cli", "key_quiet", 0)
		var busy []audit.Event
		for i := range 1000 {
			busy = append(busy, e.record("admin-token", "key_busy", i))
			if i == 500 {
				e.record("admin-token", "team_0123456789abcdef", i)
			}
		}
		e.scans.take()
		p, err := e.log.Events(ctx, audit.Query{Target: "key_quiet"})
		require.NoError(t, err)
		require.Equal(t, []audit.Event{quiet}, p.Events)
		require.Empty(t, p.Next)
		require.LessOrEqual(t, e.scans.take(), 1, "records read for a page of one event")

		p, err = e.log.Events(ctx, audit.Query{Target: "key_busy", Limit: 10})
		require.NoError(t, err)
		require.Equal(t, newestFirst(busy)[:10], p.Events)
		require.LessOrEqual(t, e.scans.take(), 11, "records read for a page of 10: the page and the next")
		p, err = e.log.Events(ctx, audit.Query{Target: "key_busy", Limit: 10, Cursor: p.Next})
		require.NoError(t, err)
		require.Equal(t, newestFirst(busy)[10:20], p.Events)
		require.LessOrEqual(t, e.scans.take(), 11, "records read for the next page: from the cursor on")

		require.Equal(t, newestFirst(busy), e.all(audit.Query{Target: "key_busy", Limit: 77}))
		p, err = e.log.Events(ctx, audit.Query{Target: "key_none"})
		require.NoError(t, err)
		require.Empty(t, p.Events)
	})
}

// TestRange: from and to bound the events' times, [from, to), with and
// without a target, and a cursor stays within them.
func TestRange(t *testing.T) {
	forEach(t, audit.Options{}, func(t *testing.T, e *env) {
		var evs []audit.Event
		for i := range 20 {
			evs = append(evs, e.record("cli", []string{"key_a", "key_b"}[i%2], i))
		}
		from, to := evs[5].Time, evs[15].Time
		require.Equal(t, newestFirst(evs[5:15]), e.all(audit.Query{From: from, To: to, Limit: 3}))
		var onA []audit.Event
		for _, ev := range evs[5:15] {
			if ev.Target == "key_a" {
				onA = append(onA, ev)
			}
		}
		require.Equal(t, newestFirst(onA), e.all(audit.Query{Target: "key_a", From: from, To: to, Limit: 2}))
		require.Equal(t, newestFirst(evs[:1]), e.all(audit.Query{To: evs[0].Time.Add(time.Nanosecond)}))
		require.Empty(t, e.all(audit.Query{To: evs[0].Time}))
		require.Equal(t, newestFirst(evs[19:]), e.all(audit.Query{From: evs[19].Time}))
	})
}

// TestQueryErrors: a parameter out of its range is a QueryError naming
// it, matching ErrInvalid.
func TestQueryErrors(t *testing.T) {
	e := open(t, backendtest.BoltSync, audit.Options{Retention: 30 * 24 * time.Hour})
	now := e.clock.Now()
	for _, c := range []struct {
		q     audit.Query
		param string
		msg   string
	}{
		{audit.Query{Limit: -1}, "limit", "-1: want 1 to 1000"},
		{audit.Query{Limit: 1001}, "limit", "1001: want 1 to 1000"},
		{audit.Query{To: now.Add(24*time.Hour + time.Second)}, "to", "is past now + 1 day"},
		{audit.Query{To: now.Add(-30 * 24 * time.Hour)}, "to", "is before the retention's start"},
		{audit.Query{From: now.Add(-30*24*time.Hour - time.Second)}, "from", "is before the retention's start: want 2026-10-29T09:00:00Z or later (events are kept 30 days)"},
		{audit.Query{From: now, To: now}, "from", "is not before to"},
		{audit.Query{Target: "key_a/b"}, "target", `"key_a/b": want a key's or team's id`},
		{audit.Query{Target: string(make([]byte, 65))}, "target", "want a key's or team's id"},
		{audit.Query{Cursor: "zz"}, "cursor", "not one this log gave"},
		{audit.Query{Cursor: "ffffffffffffffff0123456789abcdefFFFFFFFF"}, "cursor", "not one this log gave"},
	} {
		_, err := e.log.Events(ctx, c.q)
		var qe *audit.QueryError
		require.ErrorAs(t, err, &qe, "%+v", c.q)
		require.Equal(t, c.param, qe.Param)
		require.Contains(t, qe.Msg, c.msg)
		require.ErrorIs(t, err, ratestore.ErrInvalid)
	}
	_, err := e.log.Events(ctx, audit.Query{From: now.Add(-30 * 24 * time.Hour), To: now.Add(24 * time.Hour), Limit: 1000})
	require.NoError(t, err, "the whole retention, to now + 1 day")
}

// TestRecordInvalid: an event out of its bounds is refused, matching
// ErrInvalid, and stores nothing.
func TestRecordInvalid(t *testing.T) {
	e := open(t, backendtest.BoltSync, audit.Options{})
	long := string(make([]byte, 200))
	for _, ev := range []audit.Event{
		{Action: "key.create", Target: "key_a"},
		{Actor: long, Action: "key.create"},
		{Actor: "cli", Target: "key_a"},
		{Actor: "cli", Action: "key create"},
		{Actor: "cli", Action: "key.create", Target: "key/a"},
		{Actor: "cli", Action: "key.create", Address: long},
		{Actor: "cli", Action: "key.create", Changes: map[string]audit.Change{"a b": {}}},
		{Actor: "cli", Action: "key.create", Changes: map[string]audit.Change{"name": {From: json.RawMessage("{")}}},
	} {
		_, err := e.log.Record(ctx, ev)
		require.ErrorIs(t, err, ratestore.ErrInvalid, "%+v", ev)
	}
	require.Empty(t, e.records("A/"))
}

// TestPagesWhileRecording: pages read while events are recorded at once
// hold no event twice, and every event recorded before the first page,
// in order; those recorded meanwhile are newer than the first page, so
// they are not on the later ones.
func TestPagesWhileRecording(t *testing.T) {
	forEach(t, audit.Options{}, func(t *testing.T, e *env) {
		var before []audit.Event
		for i := range 300 {
			before = append(before, e.record("cli", "key_a", i))
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 2 {
			wg.Go(func() {
				for i := range 300 {
					select {
					case <-stop:
						return
					default:
					}
					_, err := e.log.Record(ctx, audit.Event{Actor: "admin-token", Action: "key.update", Target: fmt.Sprintf("key_w%d", w),
						Changes: map[string]audit.Change{"n": {To: jsonOf(i)}}})
					require.NoError(t, err)
					if i%10 == 0 {
						e.clock.Advance(time.Millisecond)
					}
				}
			})
		}
		got := e.all(audit.Query{Limit: 7})
		close(stop)
		wg.Wait()
		seen := map[string]bool{}
		var old []audit.Event
		for _, ev := range got {
			b, _ := json.Marshal(ev)
			require.False(t, seen[string(b)], "event twice: %s", b)
			seen[string(b)] = true
			if ev.Target == "key_a" {
				old = append(old, ev)
			}
		}
		require.Equal(t, newestFirst(before), old, "every event recorded before, once, in order")
	})
}

// TestSweep: events past the retention are dropped, both their records,
// in batches, and the rest stay; a read-only log neither records nor
// sweeps.
func TestSweep(t *testing.T) {
	forEach(t, audit.Options{Retention: 48 * time.Hour}, func(t *testing.T, e *env) {
		const old = 1203 // more than two batches
		for i := range old {
			_, err := e.log.Record(ctx, audit.Event{Actor: "cli", Action: "key.update", Target: fmt.Sprintf("key_%d", i%7)})
			require.NoError(t, err)
			e.clock.Advance(time.Millisecond)
		}
		e.clock.Advance(24 * time.Hour)
		kept := e.record("cli", "key_0", 1)
		untargeted, err := e.log.Record(ctx, audit.Event{Actor: "cli", Action: "prices.reload"})
		require.NoError(t, err)
		n, err := e.log.Sweep(ctx)
		require.NoError(t, err)
		require.Zero(t, n, "nothing is past the retention yet")
		require.Len(t, e.records("A/"), 2*old+3)

		e.clock.Advance(24*time.Hour + time.Second)
		e.scans.take()
		n, err = e.log.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, old, n)
		require.LessOrEqual(t, e.scans.take(), old+3+1, "the sweep reads the expired events and one more a batch")
		require.Len(t, e.records("A/"), 3, "both records of each expired event dropped")
		require.Equal(t, []audit.Event{untargeted, kept}, e.all(audit.Query{}))
		require.Equal(t, []audit.Event{kept}, e.all(audit.Query{Target: "key_0"}))
	})
}

// TestReadOnly: a read-only log reads what another recorded, and
// records and sweeps nothing.
func TestReadOnly(t *testing.T) {
	clock := fakeclock.New(t0)
	db, err := ratestore.Open(filepath.Join(t.TempDir(), "r.db"), ratestore.Options{Now: clock.Now})
	require.NoError(t, err)
	defer db.Close()
	rw, err := audit.Open(db, audit.Options{Retention: time.Hour})
	require.NoError(t, err)
	ev, err := rw.Record(ctx, audit.Event{Actor: "cli", Action: "key.delete", Target: "key_a"})
	require.NoError(t, err)
	require.NoError(t, rw.Close(ctx))

	ro, err := audit.Open(db, audit.Options{ReadOnly: true, Retention: time.Hour})
	require.NoError(t, err)
	defer ro.Close(ctx)
	p, err := ro.Events(ctx, audit.Query{Target: "key_a"})
	require.NoError(t, err)
	require.Equal(t, []audit.Event{ev}, p.Events)
	_, err = ro.Record(ctx, audit.Event{Actor: "cli", Action: "key.update"})
	require.ErrorIs(t, err, audit.ErrReadOnly)
	clock.Advance(2 * time.Hour)
	_, err = ro.Sweep(ctx)
	require.ErrorIs(t, err, audit.ErrReadOnly)
	n := 0
	require.NoError(t, db.Scan(ctx, []byte("A/"), func(k, v []byte) error { n++; return nil }))
	require.Equal(t, 2, n, "nothing recorded, nothing swept")
}

// TestCorrupt: a record that is not an event fails the page that reads it
// with ErrCorrupt, naming it, and never panics; the sweep drops it.
func TestCorrupt(t *testing.T) {
	for _, v := range []string{`{`, `[]`, `{"actor":""}`, `{"actor":"cli","action":"x","extra":1}`, "\xff", `{"actor":"cli","action":"x"} {}`} {
		e := open(t, backendtest.BoltSync, audit.Options{Retention: time.Hour})
		ev := e.record("cli", "key_a", 1)
		key := fmt.Sprintf("A/e/%016x0123456789abcdef%08x", ^uint64(t0.UnixNano()), 7)
		e.put(key, []byte(v))
		_, err := e.log.Events(ctx, audit.Query{})
		require.ErrorIs(t, err, ratestore.ErrCorrupt, v)
		require.ErrorContains(t, err, key)
		require.NotErrorIs(t, err, ratestore.ErrInvalid, "not the query's fault")
		p, err := e.log.Events(ctx, audit.Query{Target: "key_a"})
		require.NoError(t, err)
		require.Equal(t, []audit.Event{ev}, p.Events, "another target's page does not read it")
		e.clock.Advance(2 * time.Hour)
		n, err := e.log.Sweep(ctx)
		require.NoError(t, err)
		require.Equal(t, 2, n)
		require.Empty(t, e.records("A/"))
	}
	e := open(t, backendtest.BoltSync, audit.Options{})
	e.put("A/e/short", []byte(`{}`))
	_, err := e.log.Events(ctx, audit.Query{})
	require.ErrorIs(t, err, ratestore.ErrCorrupt)
}

// TestPageBytes: a page of large events ends once it holds MaxPageBytes,
// before its limit, and the next page goes on from there.
func TestPageBytes(t *testing.T) {
	e := open(t, backendtest.BoltSync, audit.Options{})
	big := jsonOf(strings.Repeat("m", 300<<10))
	var want []audit.Event
	for range 20 {
		e.clock.Advance(time.Second)
		ev, err := e.log.Record(ctx, audit.Event{Actor: "cli", Action: "key.update", Target: "key_a",
			Changes: map[string]audit.Change{"models": {From: big, To: json.RawMessage(`[]`)}}})
		require.NoError(t, err)
		want = append(want, ev)
	}
	p, err := e.log.Events(ctx, audit.Query{Limit: audit.MaxLimit})
	require.NoError(t, err)
	require.Len(t, p.Events, audit.MaxPageBytes/(300<<10)+1, "the page that reaches MaxPageBytes")
	require.NotEmpty(t, p.Next)
	require.Equal(t, newestFirst(want), e.all(audit.Query{Limit: audit.MaxLimit}))
	_, err = e.log.Record(ctx, audit.Event{Actor: "cli", Action: "key.update",
		Changes: map[string]audit.Change{"a": {From: big}, "b": {From: big}, "c": {From: big}, "d": {From: big}}})
	require.ErrorIs(t, err, ratestore.ErrInvalid, "an event over MaxEvent")
}
