package httplimit_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sfItem is an Item of a Structured Field (RFC 9651): a bare item and its
// parameters, in order.
type sfItem struct {
	bare   any // int64, float64, string (sf-string), sfToken, []byte, bool
	params []sfParam
}

type sfParam struct {
	key string
	val any
}

type sfToken string

// parseSFList parses a List field value strictly by RFC 9651, section
// 4.2.1, but for inner lists, which no field here may hold.
func parseSFList(s string) ([]sfItem, error) {
	p := &sfParser{s: s}
	p.skip(" ")
	var items []sfItem
	for p.i < len(p.s) {
		if p.peek() == '(' {
			return nil, p.fail("inner list")
		}
		it, err := p.item()
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		p.skip(" \t")
		if p.i == len(p.s) {
			return items, nil
		}
		if p.s[p.i] != ',' {
			return nil, p.fail("want ','")
		}
		p.i++
		p.skip(" \t")
		if p.i == len(p.s) {
			return nil, p.fail("trailing comma")
		}
	}
	return nil, p.fail("empty list")
}

type sfParser struct {
	s string
	i int
}

func (p *sfParser) fail(why string) error {
	return fmt.Errorf("structured field %q at %d: %s", p.s, p.i, why)
}

func (p *sfParser) peek() byte {
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *sfParser) skip(set string) {
	for p.i < len(p.s) && strings.IndexByte(set, p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *sfParser) item() (sfItem, error) {
	bare, err := p.bare()
	if err != nil {
		return sfItem{}, err
	}
	it := sfItem{bare: bare}
	for p.peek() == ';' {
		p.i++
		p.skip(" ")
		start := p.i
		if c := p.peek(); !(c >= 'a' && c <= 'z' || c == '*') {
			return sfItem{}, p.fail("bad parameter key")
		}
		for c := p.peek(); c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("_-.*", c) >= 0 && c != 0; c = p.peek() {
			p.i++
		}
		prm := sfParam{key: p.s[start:p.i], val: true}
		if p.peek() == '=' {
			p.i++
			if prm.val, err = p.bare(); err != nil {
				return sfItem{}, err
			}
		}
		it.params = append(it.params, prm)
	}
	return it, nil
}

func (p *sfParser) bare() (any, error) {
	c := p.peek()
	switch {
	case c == '-' || c >= '0' && c <= '9':
		m := regexp.MustCompile(`^-?[0-9]+(\.[0-9]+)?`).FindString(p.s[p.i:])
		p.i += len(m)
		intPart, frac, dec := strings.Cut(strings.TrimPrefix(m, "-"), ".")
		if intPart == "" || !dec && len(intPart) > 15 || dec && (len(intPart) > 12 || len(frac) > 3) {
			return nil, p.fail("bad number")
		}
		if dec {
			return strconv.ParseFloat(m, 64)
		}
		return strconv.ParseInt(m, 10, 64)
	case c == '"':
		var b strings.Builder
		for p.i++; p.i < len(p.s); p.i++ {
			switch c := p.s[p.i]; {
			case c == '\\':
				p.i++
				if n := p.peek(); n != '"' && n != '\\' {
					return nil, p.fail("bad escape")
				}
				b.WriteByte(p.s[p.i])
			case c == '"':
				p.i++
				return b.String(), nil
			case c < 0x20 || c > 0x7e:
				return nil, p.fail("bad string character")
			default:
				b.WriteByte(c)
			}
		}
		return nil, p.fail("unterminated string")
	case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '*':
		m := regexp.MustCompile(`^[A-Za-z*][!#$%&'*+\-.^_` + "`" + `|~0-9A-Za-z:/]*`).FindString(p.s[p.i:])
		p.i += len(m)
		return sfToken(m), nil
	case c == '?':
		p.i++
		switch p.peek() {
		case '0', '1':
			p.i++
			return p.s[p.i-1] == '1', nil
		}
		return nil, p.fail("bad boolean")
	case c == ':':
		j := strings.IndexByte(p.s[p.i+1:], ':')
		if j < 0 {
			return nil, p.fail("unterminated byte sequence")
		}
		v := p.s[p.i+1 : p.i+1+j]
		p.i += j + 2
		return []byte(v), nil
	}
	return nil, p.fail("bad bare item")
}

// policyItem is an item of RateLimit-Policy or RateLimit, checked by the
// draft's rules: a String name, and the Integer parameters it defines.
type policyItem struct {
	name   string
	params map[string]int64
}

// parseRateLimitField parses a RateLimit-Policy (policy) or RateLimit
// field by draft-ietf-httpapi-ratelimit-headers-11: RateLimit-Policy items
// have q (required, >= 0) and w (optional, >= 1); RateLimit items have r
// (required, >= 0) and t (optional, >= 0). Both are non-empty lists.
func parseRateLimitField(t testing.TB, h http.Header, name string) []policyItem {
	t.Helper()
	lines := h.Values(name)
	require.NotEmpty(t, lines, "no %s field", name)
	items, err := parseSFList(strings.Join(lines, ", "))
	require.NoError(t, err)
	allowed := map[string]int64{"q": 0, "w": 1} // a parameter and its least value
	required := "q"
	if name == "RateLimit" {
		allowed, required = map[string]int64{"r": 0, "t": 0}, "r"
	}
	var out []policyItem
	for _, it := range items {
		s, ok := it.bare.(string)
		require.True(t, ok, "%s: item %v is not a String", name, it.bare)
		pi := policyItem{name: s, params: map[string]int64{}}
		for _, prm := range it.params {
			least, known := allowed[prm.key]
			require.True(t, known, "%s: unexpected parameter %q", name, prm.key)
			v, ok := prm.val.(int64)
			require.True(t, ok, "%s: %s=%v is not an Integer", name, prm.key, prm.val)
			require.GreaterOrEqual(t, v, least, "%s: %s", name, prm.key)
			_, dup := pi.params[prm.key]
			require.False(t, dup, "%s: %s twice", name, prm.key)
			pi.params[prm.key] = v
		}
		require.Contains(t, pi.params, required, "%s: no %s", name, required)
		out = append(out, pi)
	}
	return out
}

// checkFields checks every rate-limit field of a decided response against
// the draft's grammar and the package's promises, and returns the
// RateLimit item.
func checkFields(t testing.TB, h http.Header) policyItem {
	t.Helper()
	rl := parseRateLimitField(t, h, "RateLimit")
	require.Len(t, rl, 1, "RateLimit reports the binding rule only")
	if len(h.Values("RateLimit-Policy")) > 0 {
		var names []string
		for _, p := range parseRateLimitField(t, h, "RateLimit-Policy") {
			names = append(names, p.name)
		}
		require.Contains(t, names, rl[0].name, "RateLimit names a policy of RateLimit-Policy")
	}
	digits := regexp.MustCompile(`^[0-9]+$`)
	for _, f := range []string{"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		require.Len(t, h.Values(f), 1, f)
		require.Regexp(t, digits, h.Get(f), f)
	}
	require.Equal(t, strconv.FormatInt(rl[0].params["r"], 10), h.Get("X-RateLimit-Remaining"))
	if ra := h.Values("Retry-After"); len(ra) > 0 {
		require.Len(t, ra, 1)
		require.Regexp(t, `^[1-9][0-9]*$`, ra[0], "Retry-After: delay-seconds, at least 1")
		// The draft: Retry-After not before the end of the effective window.
		require.Equal(t, ra[0], strconv.FormatInt(rl[0].params["t"], 10))
	}
	return rl[0]
}

func TestParseSFList(t *testing.T) {
	items, err := parseSFList(`"a";q=1;w=60, "b\"c";q=0, tok;x;y=?0, :aGk=:, 1.5`)
	require.NoError(t, err)
	require.Len(t, items, 5)
	require.Equal(t, "a", items[0].bare)
	require.Equal(t, []sfParam{{"q", int64(1)}, {"w", int64(60)}}, items[0].params)
	require.Equal(t, `b"c`, items[1].bare)
	require.Equal(t, sfToken("tok"), items[2].bare)
	require.Equal(t, []sfParam{{"x", true}, {"y", false}}, items[2].params)
	for _, bad := range []string{``, `"a",`, `"a";Q=1`, `"a" "b"`, `"a\n"`, `"a";q=1234567890123456`, `"unterminated`, `(inner)`, `"a";q=1,,"b"`} {
		_, err := parseSFList(bad)
		require.Error(t, err, bad)
	}
}
