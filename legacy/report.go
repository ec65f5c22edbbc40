package legacy

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrRefused is matched (errors.Is) by the error returned for a legacy file
// that is refused as a whole: nothing of it is imported, and the Report
// lists every problem found in Refusals.
var ErrRefused = errors.New("legacy file refused")

// Report says what an import did with a legacy key file (or, from Parse,
// would do): what it imported, and every entry it left out or refused, and
// every oddity it tolerated, each with a reason. It never holds a secret.
// The classification of each problem is documented in the package
// documentation.
//
// A refused file imports nothing: Refusals is not empty, Keys and Windows are
// 0, and the error matches ErrRefused. Otherwise every entry of "keys" is
// either imported (counted in Keys) or skipped (listed in Skips).
//
// Report marshals to JSON; empty lists are left out.
type Report struct {
	Entries int `json:"entries"` // elements of "keys" read
	Keys    int `json:"keys"`    // keys imported
	Windows int `json:"windows"` // usage windows of the imported keys
	// IgnoredCaches counts the entries that carried a rolling_window_cache,
	// which is never read: usage_windows is the source of truth.
	IgnoredCaches int `json:"ignored_caches"`

	Refusals []Issue `json:"refusals,omitempty"` // problems that refuse the whole file
	Skips    []Issue `json:"skips,omitempty"`    // entries left out; the rest imports
	Notes    []Issue `json:"notes,omitempty"`    // oddities tolerated
}

// Issue is one problem or oddity, located by entry and field.
type Issue struct {
	// Index is the position of the entry in "keys", from 0; -1 for the
	// file as a whole.
	Index int `json:"index"`
	// Name is the entry's "name" as far as it could be read ("" when it has
	// none); "[redacted]" when it contains the entry's secret.
	Name string `json:"name,omitempty"`
	// Field is the field concerned, as a path inside the entry
	// ("token_limit_per_5h", "usage_windows[3].tokens_used") or, when Index
	// is -1, inside the file ("keys"); "" for the entry or file itself.
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

// String renders the issue on one line:
//
//	keys[1] "ci-bot": usage_windows[0].tokens_used: negative: got -5, want a non-negative integer
func (i Issue) String() string {
	var b strings.Builder
	if i.Index >= 0 {
		b.WriteString("keys[" + strconv.Itoa(i.Index) + "]")
		if i.Name != "" {
			b.WriteString(" " + strconv.Quote(i.Name))
		}
		b.WriteString(": ")
	}
	if i.Field != "" {
		b.WriteString(i.Field + ": ")
	}
	b.WriteString(i.Reason)
	return b.String()
}

// Refused reports whether the file was refused as a whole (nothing imported).
func (r Report) Refused() bool { return len(r.Refusals) > 0 }

// summaryLines is how many issues of each list Summary shows.
const summaryLines = 10

// Summary renders the report for a person, in a few lines: one that says
// what was imported or that the file was refused, then up to ten issues of
// each list.
func (r Report) Summary() string {
	var b strings.Builder
	if r.Refused() {
		fmt.Fprintf(&b, "legacy file refused, nothing imported: %s in %s\n",
			plural(len(r.Refusals), "problem"), plural(r.Entries, "entry"))
	} else {
		fmt.Fprintf(&b, "imported %s with %s from %s; %d skipped, %s\n",
			plural(r.Keys, "key"), plural(r.Windows, "usage window"), plural(r.Entries, "entry"),
			len(r.Skips), plural(len(r.Notes), "note"))
	}
	writeIssues(&b, "refused", r.Refusals)
	writeIssues(&b, "skipped", r.Skips)
	writeIssues(&b, "notes", r.Notes)
	if r.IgnoredCaches > 0 {
		fmt.Fprintf(&b, "rolling_window_cache ignored in %s: usage_windows is the source of truth\n",
			plural(r.IgnoredCaches, "entry"))
	}
	return b.String()
}

func writeIssues(b *strings.Builder, title string, issues []Issue) {
	if len(issues) == 0 {
		return
	}
	b.WriteString(title + ":\n")
	for _, i := range issues[:min(len(issues), summaryLines)] {
		b.WriteString("  " + i.String() + "\n")
	}
	if n := len(issues) - summaryLines; n > 0 {
		fmt.Fprintf(b, "  ... and %d more\n", n)
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	if stem, ok := strings.CutSuffix(noun, "ry"); ok { // entry, not key
		noun = stem + "rie"
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// errorLines is how many refusals the error message of a refused file names.
const errorLines = 3

// Err returns the error of a refused file, nil if r is not refused:
// ErrRefused, with the first few refusals.
func (r Report) Err() error {
	if !r.Refused() {
		return nil
	}
	return refusedError(r.Refusals)
}

// refusedError is the error of a refused file: ErrRefused, with the first
// few refusals.
func refusedError(refusals []Issue) error {
	var b strings.Builder
	for n, i := range refusals[:min(len(refusals), errorLines)] {
		if n > 0 {
			b.WriteString("; ")
		}
		b.WriteString(i.String())
	}
	if n := len(refusals) - errorLines; n > 0 {
		fmt.Fprintf(&b, "; and %d more", n)
	}
	return fmt.Errorf("%w: %s: %s", ErrRefused, plural(len(refusals), "problem"), b.String())
}
