// Package text checks names: the free text the key store keeps (names and
// model patterns), for the key store and for the importer that must refuse,
// before anything is written, what the key store would refuse; and the
// names of limiters and quotas, which the store's keys and the state
// encodings hold.
package text

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Problem says what is wrong with s as a text of at most max bytes (too
// long, not UTF-8, a control character), or returns "".
func Problem(s string, max int) string {
	if len(s) > max {
		return fmt.Sprintf("is %d bytes long, more than %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, c := range s {
		if unicode.IsControl(c) {
			return fmt.Sprintf("holds the control character %U", c)
		}
	}
	return ""
}

// Name reports whether name is 1 to max bytes of [A-Za-z0-9_.:@+-]: the
// names of quotas, and of limiters. The set leaves out '|' and '$', which
// separate fields and composite parts in the state encodings, and the zero
// byte, which ends a limiter name in store keys.
func Name(name string, max int) bool {
	if len(name) == 0 || len(name) > max {
		return false
	}
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '.', c == ':', c == '@', c == '+', c == '-':
		default:
			return false
		}
	}
	return true
}
