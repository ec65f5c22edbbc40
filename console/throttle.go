package console

import (
	"net"
	"net/http"
	"net/netip"
	"time"
)

// throttle counts the wrong tokens of the last FailureWindow, by address
// and in all. Only a failure is counted, and only one that was checked:
// an attempt refused with 429 is not, so that an address recovers a
// FailureWindow after its last counted failure, however often it knocks
// meanwhile.
//
// It stays small: a failure is counted only while fewer than
// MaxGlobalFailures are, so at most that many addresses have one within
// the window, and each failure forgets the addresses whose failures are
// all older.
type throttle struct {
	byAddr map[string][]time.Time // the failures within the window, oldest first; MaxFailures at most
	all    []time.Time            // the same, of every address; MaxGlobalFailures at most
}

// wait returns how long addr must wait before a token of its is checked:
// 0 when one is checked now.
func (t *throttle) wait(addr string, now time.Time) time.Duration {
	t.all = recent(t.all, now)
	var d time.Duration
	if len(t.all) >= MaxGlobalFailures {
		d = t.all[0].Add(FailureWindow).Sub(now)
	}
	if f := recent(t.byAddr[addr], now); len(f) >= MaxFailures {
		d = max(d, f[0].Add(FailureWindow).Sub(now))
	}
	return d
}

// fail counts a wrong token of addr at now.
func (t *throttle) fail(addr string, now time.Time) {
	for a, f := range t.byAddr {
		if len(recent(f, now)) == 0 {
			delete(t.byAddr, a)
		}
	}
	t.byAddr[addr] = keepLast(append(recent(t.byAddr[addr], now), now), MaxFailures)
	t.all = keepLast(append(t.all, now), MaxGlobalFailures)
}

// recent returns the failures of f within the window that ends at now.
func recent(f []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(f) && !f[i].After(now.Add(-FailureWindow)) {
		i++
	}
	return f[i:]
}

// keepLast returns the last n of f.
func keepLast(f []time.Time, n int) []time.Time {
	if len(f) > n {
		return f[len(f)-n:]
	}
	return f
}

// remoteAddr is the address a request's failures are counted by: its
// peer's IP, or for IPv6 its /64, which one host usually has whole.
func remoteAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
