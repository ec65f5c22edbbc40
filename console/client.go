package console

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// maxForwardHops bounds the X-Forwarded-For entries read from the right:
// a chain of trusted proxies longer than this is not believed further.
const maxForwardHops = 32

// client returns the address r comes from: its peer's, or, when the peer
// is one of Options.TrustedProxies, the last X-Forwarded-For entry that
// is not one of them. A proxy appends the address it got a request from
// to the end of X-Forwarded-For, so read from the right every entry up to
// the first untrusted one was written by a trusted proxy, and that one is
// the client's; the entries before it were written by the client itself
// and mean nothing. Reading stops at an entry that is not an address, or
// after maxForwardHops, at the last trusted one. Without trusted proxies
// X-Forwarded-For is never read: any caller could write it.
//
// The zero Addr means the peer has no IP address (a Unix socket).
func (c *Console) client(r *http.Request) netip.Addr {
	addr := parseAddr(r.RemoteAddr)
	if len(c.trusted) == 0 || !c.trustedProxy(addr) {
		return addr
	}
	values := r.Header.Values("X-Forwarded-For")
	hops := 0
	for i := len(values) - 1; i >= 0; i-- {
		rest := values[i]
		for rest != "" && hops < maxForwardHops {
			var entry string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				rest, entry = rest[:j], rest[j+1:]
			} else {
				rest, entry = "", rest
			}
			hop := parseAddr(strings.TrimSpace(entry))
			if !hop.IsValid() {
				return addr
			}
			addr = hop
			hops++
			if !c.trustedProxy(addr) {
				return addr
			}
		}
	}
	return addr
}

// trustedProxy reports whether a is in one of Options.TrustedProxies.
func (c *Console) trustedProxy(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddr parses an address as a peer or X-Forwarded-For names it:
// "IP", "IP:port" or "[IPv6]:port", IPv4-mapped IPv6 as IPv4, without
// its zone. The zero Addr when s is none of these.
func parseAddr(s string) netip.Addr {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, perr := netip.ParseAddrPort(s)
		if perr != nil {
			return netip.Addr{}
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone("")
}

// throttleKey is what the wrong tokens of a are counted by: an IPv4
// address, or the /64 of an IPv6 one, which one host usually has whole.
// The zero Prefix counts every peer without an address together.
func throttleKey(a netip.Addr) netip.Prefix {
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// keyString is how the log names a throttle key: the address of an IPv4
// key, the prefix of an IPv6 one.
func keyString(p netip.Prefix) string {
	switch {
	case !p.IsValid():
		return "unknown"
	case p.Addr().Is4():
		return p.Addr().String()
	}
	return p.String()
}

// clientString is how the log names a client address.
func clientString(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	return a.String()
}

// crossSite reports whether a browser sent r for a page of another
// origin: its Sec-Fetch-Site, which browsers write themselves, is not
// same-origin (cross-site, same-site: another subdomain, none: typed in
// the address bar), or its Origin is not the console's own. A request
// with neither field is not a browser's and is not judged by them: a
// script's. The origin's scheme is https over TLS or with
// Options.SecureCookie (a TLS proxy in front), http otherwise, and its
// host the request's Host, default ports left out on both sides.
func (c *Console) crossSite(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return true
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return true // "null", or not an origin
	}
	scheme := "http"
	if r.TLS != nil || c.secureCookie {
		scheme = "https"
	}
	return !strings.EqualFold(u.Scheme, scheme) || !strings.EqualFold(hostOf(u.Host, scheme), hostOf(r.Host, scheme))
}

// hostOf is host without the default port of scheme.
func hostOf(host, scheme string) string {
	if scheme == "https" {
		return strings.TrimSuffix(host, ":443")
	}
	return strings.TrimSuffix(host, ":80")
}
