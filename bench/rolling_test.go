package bench

import (
	"fmt"
	"testing"
	"time"

	"github.com/ratestore/ratestore/strategies"
)

// The rolling-window benchmarks compare the token check of an LLM gateway
// for one API key, "may this key spend more tokens?", and the record that
// follows a response, as a function of how many legacy usage windows the
// key had accumulated:
//
//   - impl=legacy is the code ratestore replaces (LEGACY.md §1): the key's
//     windows as a list of fixed 5-hour windows, a check filters those with
//     start >= now-5h and sums them, and a record adds to the window that
//     is still open or appends a new one. Both are O(windows).
//   - impl=rollingwindow is strategies.RollingWindow (5 hours in 5-minute
//     buckets) on the state the lazy migration builds from those windows
//     (RollingWindow.Merge), then used as a gateway uses it: Peek to check,
//     Record to record. At most Window/Bucket = 60 buckets live whatever
//     the history, so the cost does not depend on the window count.
//
// DESIGN.md's targets: rollingwindow flat in the window count (100k against
// 10 windows: ratio <= 1.2) and >= 100x faster than legacy at 10k windows.

var rollingWindowCounts = []int{10, 100, 1_000, 10_000, 100_000}

const (
	legacyWindow = 5 * time.Hour
	rollingLimit = 100_000
)

var rollingStrategy = strategies.RollingWindow{Limit: rollingLimit, Window: legacyWindow, Bucket: 5 * time.Minute}

// legacyUsage is a key's usage as the legacy file kept it.
type legacyUsage struct {
	windows []legacyWindowRec
}

type legacyWindowRec struct {
	start  int64 // Unix ns
	tokens int64
}

// used is the legacy check's sum: every window that started within the
// last five hours, by a scan of all of them.
func (u *legacyUsage) used(now int64) int64 {
	var sum int64
	for _, w := range u.windows {
		if w.start >= now-int64(legacyWindow) {
			sum += w.tokens
		}
	}
	return sum
}

// record adds tokens to the window still open at now, or opens one.
func (u *legacyUsage) record(now, tokens int64) {
	for i := range u.windows {
		if w := &u.windows[i]; w.start > now-int64(legacyWindow) {
			w.tokens += tokens
			return
		}
	}
	u.windows = append(u.windows, legacyWindowRec{start: now, tokens: tokens})
}

// legacyHistory returns n windows, the newest open at now and the others
// one per five hours before it, oldest first, as a long-lived key would
// have accumulated them without pruning.
func legacyHistory(n int, now int64) []legacyWindowRec {
	ws := make([]legacyWindowRec, n)
	for i := range ws {
		ws[i] = legacyWindowRec{start: now - int64(n-1-i)*int64(legacyWindow) - int64(time.Minute), tokens: 900}
	}
	return ws
}

// BenchmarkRollingWindow: op=check and op=record for each window count,
// legacy first and ratestore right after it, so that x-vs-legacy compares
// runs made moments apart. The clock advances 1 s per operation.
func BenchmarkRollingWindow(b *testing.B) {
	start := time.Date(2026, 1, 18, 11, 0, 0, 0, time.UTC).UnixNano()
	for _, op := range []string{"check", "record"} {
		for _, n := range rollingWindowCounts {
			var base float64
			b.Run(fmt.Sprintf("op=%s/impl=legacy/windows=%d", op, n), func(b *testing.B) {
				b.ReportAllocs()
				u := &legacyUsage{windows: legacyHistory(n, start)}
				now := start
				var sink int64
				for b.Loop() {
					now += int64(time.Second)
					if op == "check" {
						sink += u.used(now)
					} else {
						u.record(now, 1)
					}
				}
				_ = sink
				base = nsPerOp(b)
			})
			b.Run(fmt.Sprintf("op=%s/impl=rollingwindow/windows=%d", op, n), func(b *testing.B) {
				b.ReportAllocs()
				p := rollingStrategy.Prepare()
				st := p.NewState()
				for _, w := range legacyHistory(n, start) {
					if err := rollingStrategy.Merge(st, start, w.start, w.tokens); err != nil {
						b.Fatal(err)
					}
				}
				c := strategies.Call{Now: start, DryRun: true}
				if op == "record" {
					c = strategies.Call{Now: start, N: 1, Record: true}
				}
				for b.Loop() {
					c.Now += int64(time.Second)
					if _, err := p.Decide(st, c); err != nil {
						b.Fatal(err)
					}
				}
				if ns := nsPerOp(b); ns > 0 && base > 0 {
					b.ReportMetric(base/ns, "x-vs-legacy")
				}
			})
		}
	}
}
