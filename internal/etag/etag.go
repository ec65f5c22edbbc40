// Package etag makes and checks the entity tags of answers, so that a
// client that polls (the console) learns in a 304 with no body that what
// it shows has not changed.
package etag

import (
	"crypto/sha256"
	"encoding/base64"
	"strings"
)

// Of returns the strong entity tag of body: a quoted hash of it, so that
// two bodies have one tag only if they are the same bytes.
func Of(body []byte) string {
	h := sha256.Sum256(body)
	return `"` + base64.RawURLEncoding.EncodeToString(h[:16]) + `"`
}

// Matches reports whether ifNoneMatch, a request's If-None-Match field,
// names tag (weakly, as RFC 9110 compares them for If-None-Match) or is
// "*".
func Matches(ifNoneMatch, tag string) bool {
	for part := range strings.SplitSeq(ifNoneMatch, ",") {
		t := strings.TrimPrefix(strings.TrimSpace(part), "W/")
		if t == tag || t == "*" {
			return true
		}
	}
	return false
}
