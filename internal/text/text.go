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

// Problem says what is wrong with s, a text an operator sets, as one of at
// most max bytes, or returns "": too long, not UTF-8, or holding a
// character that is not what it shows. Those are the control characters
// (category Cc), the format characters (Cf: bidi overrides and isolates
// such as U+202E, which reorder what follows; zero-width spaces and
// joiners such as U+200B, which show nothing; soft hyphens, tags) and the
// line and paragraph separators (Zl, Zp), which break the line a log or a
// table shows the text in. A name holding one looks like another, or
// like nothing: "admin" and "admin\u200b" are two names that read alike.
func Problem(s string, max int) string { return problem(s, max, true) }

// Stored says what is wrong with s as a text read back from storage, of
// at most max bytes, or returns "": what Problem refuses but for the
// characters it refuses beyond the control characters, which texts
// stored before Problem refused them may hold. Such a text is kept and
// shown as stored; only new text must pass Problem.
func Stored(s string, max int) string { return problem(s, max, false) }

// problem is Problem when incoming is set, else Stored.
func problem(s string, max int, incoming bool) string {
	if len(s) > max {
		return fmt.Sprintf("is %d bytes long, more than %d", len(s), max)
	}
	if !utf8.ValidString(s) {
		return "is not valid UTF-8"
	}
	for _, c := range s {
		switch {
		case ' ' <= c && c < 0x7f: // printable ASCII: the common case, at once
		case unicode.IsControl(c):
			return fmt.Sprintf("holds the control character %U", c)
		case incoming && c >= 0x80:
			if what := hidden(c); what != "" {
				return fmt.Sprintf("holds the %s %U", what, c)
			}
		}
	}
	return ""
}

// hidden names the kind of c, a character beyond ASCII, when Problem
// refuses it beyond the control characters, or returns "". The line and
// paragraph separators (categories Zl and Zp) are one character each.
func hidden(c rune) string {
	switch {
	case unicode.Is(unicode.Cf, c):
		return "format character"
	case c == '\u2028':
		return "line separator"
	case c == '\u2029':
		return "paragraph separator"
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
