// Package text checks the free text the key store keeps, names and model
// patterns, for the key store and for the importer that must refuse, before
// anything is written, what the key store would refuse.
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
