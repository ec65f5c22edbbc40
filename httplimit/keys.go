package httplimit

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// ErrNoAPIKey is the error of APIKey's KeyFunc for a request that carries
// no API key. The middleware answers it with 401 Unauthorized.
var ErrNoAPIKey = errors.New("httplimit: no API key: want Authorization: Bearer <key> or X-API-Key")

// APIKey returns a KeyFunc that counts a request under its API key: the
// token of an "Authorization: Bearer <key>" field or, when there is no
// bearer token, the "X-API-Key" field. A request with neither gets
// ErrNoAPIKey.
//
// The key is APIKeyHash of the secret, not the secret: the database, and
// any error or log line that names a key, never hold an API key.
func APIKey() KeyFunc { return apiKey }

func apiKey(r *http.Request) (string, error) {
	secret := APISecret(r)
	if secret == "" {
		return "", ErrNoAPIKey
	}
	return APIKeyHash(secret), nil
}

// APISecret returns the API key a request carries, as APIKey reads it: the
// token of an "Authorization: Bearer <key>" field or, when there is no
// bearer token, the "X-API-Key" field; "" when there is neither. Handlers
// that authenticate the key themselves (a key store) read it the same way.
func APISecret(r *http.Request) string {
	if scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		if token = strings.TrimSpace(token); token != "" {
			return token
		}
	}
	return strings.TrimSpace(r.Header.Get("X-Api-Key"))
}

// APIKeyHash returns the key that APIKey counts secret under: the first
// 128 bits of its SHA-256, in unpadded base64url (22 bytes). API keys are
// random enough that a plain hash cannot be reversed, and 128 bits keep
// keys of different secrets apart. A handler that records usage after the
// response (Limiter.Record) uses it to reach the same key.
func APIKeyHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// ClientIP returns a KeyFunc that counts a request under its client's IP
// address, as the standard form of netip.Addr (an IPv4 address mapped
// into IPv6 as IPv4, with no zone).
//
// By default the client is the peer of the connection, Request.RemoteAddr.
// The X-Forwarded-For and X-Real-IP fields are read only when that peer is
// within one of the trusted prefixes, the reverse proxies in front of the
// server: any client can write them, so they are worth nothing from an
// untrusted peer. From a trusted one, the client is the rightmost address
// of X-Forwarded-For (its field lines read as one list) that is not
// trusted: each proxy appends the peer it got the request from, so the
// addresses right of that one were written by trusted proxies, and those
// left of it by whoever the client is. If every address is trusted, the
// leftmost one is the client. With no X-Forwarded-For, X-Real-IP names the
// client; with neither, the peer does. An address may carry a port.
//
// A trusted proxy must append to X-Forwarded-For or replace it, and must
// replace X-Real-IP: one that passes on a client's field as it is lets
// the client choose its key.
//
// An X-Forwarded-For or X-Real-IP from a trusted peer that holds no
// address where one is due is an error (400 Bad Request), and so is a
// RemoteAddr that holds no address (500 Internal Server Error: it comes
// from the server, not the client). ClientIP panics on an invalid prefix.
func ClientIP(trusted ...netip.Prefix) KeyFunc {
	proxies := make([]netip.Prefix, len(trusted))
	for i, p := range trusted {
		if !p.IsValid() {
			panic(fmt.Sprintf("httplimit: ClientIP: invalid prefix %v", p))
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		proxies[i] = p.Masked()
	}
	isTrusted := func(a netip.Addr) bool {
		return slices.ContainsFunc(proxies, func(p netip.Prefix) bool { return p.Contains(a) })
	}
	return func(r *http.Request) (string, error) {
		peer, ok := parseAddr(r.RemoteAddr)
		if !ok {
			return "", &StatusError{http.StatusInternalServerError, fmt.Errorf("RemoteAddr %q holds no IP address", r.RemoteAddr)}
		}
		if !isTrusted(peer) {
			return peer.String(), nil
		}
		if lines := r.Header.Values("X-Forwarded-For"); len(lines) > 0 {
			client, err := forwardedFor(lines, isTrusted)
			if err != nil {
				return "", err
			}
			if client.IsValid() {
				return client.String(), nil
			}
		}
		if v := r.Header.Get("X-Real-IP"); v != "" {
			client, ok := parseAddr(strings.TrimSpace(v))
			if !ok {
				return "", &StatusError{http.StatusBadRequest, errors.New("X-Real-IP holds no IP address")}
			}
			return client.String(), nil
		}
		return peer.String(), nil
	}
}

// forwardedFor returns the client that the X-Forwarded-For field lines
// name (see ClientIP), or the zero Addr if they name none.
func forwardedFor(lines []string, isTrusted func(netip.Addr) bool) (netip.Addr, error) {
	var leftmost netip.Addr
	for i := len(lines) - 1; i >= 0; i-- {
		rest := lines[i]
		for rest != "" {
			var elem string
			if j := strings.LastIndexByte(rest, ','); j >= 0 {
				rest, elem = rest[:j], rest[j+1:]
			} else {
				rest, elem = "", rest
			}
			if elem = strings.TrimSpace(elem); elem == "" {
				continue // an empty list element (RFC 9110, section 5.6.1)
			}
			a, ok := parseAddr(elem)
			if !ok {
				return netip.Addr{}, &StatusError{http.StatusBadRequest, errors.New("X-Forwarded-For holds a value that is no IP address")}
			}
			if !isTrusted(a) {
				return a, nil
			}
			leftmost = a
		}
	}
	return leftmost, nil
}

// parseAddr parses an IP address with an optional port, in brackets for
// IPv6, and returns it without zone, IPv4 mapped into IPv6 as IPv4. It
// picks the parser by the form, as a failed parse allocates its error.
func parseAddr(s string) (netip.Addr, bool) {
	var a netip.Addr
	var err error
	switch {
	case len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']':
		a, err = netip.ParseAddr(s[1 : len(s)-1])
	case s != "" && s[0] == '[' || strings.Count(s, ":") == 1:
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// Route returns a KeyFunc that counts a request under its method and
// route: "GET /items/{id}". The route is the pattern that a ServeMux
// matched (Request.Pattern, without its method), so that every item
// shares one key; a handler wrapped outside the mux sees no pattern, and
// then the route is the URL's path, one key per path. Route never fails.
func Route() KeyFunc { return route }

func route(r *http.Request) (string, error) {
	p := r.Pattern
	if p == "" {
		p = r.URL.Path
	} else if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t") // "GET /x" matches HEAD too: the method is the request's
	}
	return r.Method + " " + p, nil
}

// Combine returns a KeyFunc that counts a request under the keys of all of
// fns: "per API key and route". The parts are joined unambiguously, each
// as its length in decimal bytes, a colon and the part (parts "a:b" and
// "c" give "3:a:b1:c", parts "a" and "b:c" give "1:a3:b:c"), so that no
// two different lists of parts give the same key. The first
// error of a part is the error. Combine panics with no KeyFunc or a nil
// one.
func Combine(fns ...KeyFunc) KeyFunc {
	if len(fns) == 0 || slices.ContainsFunc(fns, func(f KeyFunc) bool { return f == nil }) {
		panic("httplimit: Combine of no KeyFunc or a nil one")
	}
	fns = slices.Clone(fns)
	return func(r *http.Request) (string, error) {
		var buf [128]byte
		b := buf[:0]
		for _, f := range fns {
			k, err := f(r)
			if err != nil {
				return "", err
			}
			b = strconv.AppendInt(b, int64(len(k)), 10)
			b = append(append(b, ':'), k...)
		}
		return string(b), nil
	}
}
