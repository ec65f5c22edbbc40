package console

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/ratestore/ratestore/internal/fakeclock"
)

// BenchmarkWrongToken is the cost of answering a wrong bearer token to
// the admin API: from one address slowed down (refused unchecked, the
// flood of one attacker), from addresses that come and go as fast as the
// table forgets them (counted), and from new addresses while the table
// is full (checked, not counted). bytes/address is the heap the full
// table holds per address.
func BenchmarkWrongToken(b *testing.B) {
	addrs := make([]string, 4*DefaultMaxAddresses)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.%d.%d.%d:1", i>>16, (i>>8)&255, i&255)
	}
	for _, mode := range []string{"refused", "counted", "uncounted"} {
		b.Run(mode, func(b *testing.B) {
			clock := fakeclock.New(t0)
			c := newConsole(b, Options{Now: clock.Now})
			r := httptest.NewRequest("GET", "/admin/keys", nil)
			r.Header.Set("Authorization", "Bearer wrong")
			w := discard{http.Header{}}
			perAddress := -1.0
			if mode != "counted" {
				perAddress = fill(c, r, w, addrs[:DefaultMaxAddresses])
			}
			step := FailureWindow / DefaultMaxAddresses
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				switch mode {
				case "refused":
					r.RemoteAddr = addrs[0]
				case "counted":
					r.RemoteAddr = addrs[i%DefaultMaxAddresses]
					clock.Advance(step)
				default:
					r.RemoteAddr = addrs[DefaultMaxAddresses+i%(3*DefaultMaxAddresses)]
				}
				c.ServeHTTP(w, r)
			}
			if perAddress >= 0 {
				b.ReportMetric(perAddress, "bytes/address") // after ResetTimer, which drops metrics
			}
		})
	}
}

// fill sends MaxFailures wrong tokens from each of addrs, and returns the
// heap the table grew by, per address.
func fill(c *Console, r *http.Request, w http.ResponseWriter, addrs []string) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, a := range addrs {
		r.RemoteAddr = a
		for range MaxFailures {
			c.ServeHTTP(w, r)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if len(c.fails.byKey) != len(addrs) {
		panic("the table did not take every address")
	}
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(len(addrs))
}

// discard is a ResponseWriter that keeps nothing but its header, reset
// by each WriteHeader.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             { clear(d.h) }
