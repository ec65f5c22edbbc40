package text

import (
	"fmt"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestProblem: what Problem refuses, and what Stored, which reads back
// texts stored before Problem refused format characters and separators,
// refuses of it.
func TestProblem(t *testing.T) {
	const stored = "as Problem"
	for s, want := range map[string][2]string{
		"team":             {"", ""},
		"é":                {"", ""},
		"日本":               {"", ""},
		"a b":              {"", ""},
		"\u00a0nbsp\u3000": {"", ""}, // spaces that show as spaces
		"abcdefghijkl":     {"is 12 bytes long, more than 10", stored},
		"a\x01b":           {"holds the control character U+0001", stored},
		"a\tb":             {"holds the control character U+0009", stored},
		"a\u0085b":         {"holds the control character U+0085", stored},
		"\xff":             {"is not valid UTF-8", stored},
		"admin\u200b":      {"holds the format character U+200B", ""},
		"key\u202egpj.":    {"holds the format character U+202E", ""},
		"\u2066a\u2069":    {"holds the format character U+2066", ""},
		"\ufeffa":          {"holds the format character U+FEFF", ""},
		"soft\u00adhy":     {"holds the format character U+00AD", ""},
		"a\u200db":         {"holds the format character U+200D", ""},
		"\U000e0041":       {"holds the format character U+E0041", ""},
		"a\u2028b":         {"holds the line separator U+2028", ""},
		"a\u2029b":         {"holds the paragraph separator U+2029", ""},
		"a\u200bb\x01":     {"holds the format character U+200B", "holds the control character U+0001"}, // the first named
	} {
		if want[1] == stored {
			want[1] = want[0]
		}
		if got := Problem(s, 10); got != want[0] {
			t.Errorf("Problem(%q) = %q, want %q", s, got, want[0])
		}
		if got := Stored(s, 10); got != want[1] {
			t.Errorf("Stored(%q) = %q, want %q", s, got, want[1])
		}
	}
}

// TestProblemEveryRune: Problem and Stored refuse each character by the
// categories they name, and no other.
func TestProblemEveryRune(t *testing.T) {
	for c := rune(0); c <= unicode.MaxRune; c++ {
		if !utf8.ValidRune(c) {
			continue // surrogates: no UTF-8 holds them
		}
		s := string(c)
		if got, exp := Problem(s, 4), want(s, 4, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp); (got == "") != (exp == "") {
			t.Errorf("Problem(%U) = %q, want %q", c, got, exp)
		}
		if got, exp := Stored(s, 4), want(s, 4, unicode.Cc); (got == "") != (exp == "") {
			t.Errorf("Stored(%U) = %q, want %q", c, got, exp)
		}
	}
}

// want is what Problem (or Stored, by the categories given) says of s,
// reckoned by unicode.In rather than by the code's path: "" when it
// accepts s, else the end of its message, which names the first character
// of those categories.
func want(s string, max int, refused ...*unicode.RangeTable) string {
	switch {
	case len(s) > max:
		return fmt.Sprintf("is %d bytes long, more than %d", len(s), max)
	case !utf8.ValidString(s):
		return "is not valid UTF-8"
	}
	for _, c := range s {
		if unicode.In(c, refused...) {
			return fmt.Sprintf("%U", c)
		}
	}
	return ""
}

// FuzzProblem asserts that Problem accepts exactly the texts of at most
// max bytes of UTF-8 without a control character, a format character or a
// line or paragraph separator, and that its message names the first one;
// that Stored does the same with control characters alone; and that
// neither panics.
func FuzzProblem(f *testing.F) {
	for _, s := range []string{
		"", "team-a", "é", "admin\u200b", "key\u202egpj.exe", "\ufeffbom", "👨\u200d👩\u200d👧", "a\u2028b",
		"a\u2029b", "\xff", "a\x00b", "\u00adsoft", "\U000e0001tag", "\u061cal", "\u2060join", "\u202e\x12",
		strings.Repeat("x", 40),
	} {
		f.Add(s)
	}
	const max = 32
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []struct {
			name string
			got  string
			want string
		}{
			{"Problem", Problem(s, max), want(s, max, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)},
			{"Stored", Stored(s, max), want(s, max, unicode.Cc)},
		} {
			switch {
			case c.want == "" && c.got != "":
				t.Fatalf("%s(%q) = %q, want it accepted", c.name, s, c.got)
			case c.want != "" && !strings.HasSuffix(c.got, c.want):
				t.Fatalf("%s(%q) = %q, want it refused, ending in %s", c.name, s, c.got, c.want)
			}
		}
	})
}

func TestName(t *testing.T) {
	for name, want := range map[string]bool{
		"rps": true, "a.b:c@": true, "d+e-_9": true, "": false, "toolong": false,
		"a|b": false, "a$b": false, "a\x00b": false, "a b": false, "é": false,
	} {
		if got := Name(name, 6); got != want {
			t.Errorf("Name(%q) = %v, want %v", name, got, want)
		}
	}
}

// BenchmarkProblem is the check of a request's model name on the
// gateway's path, and of a name: ASCII, and not.
func BenchmarkProblem(b *testing.B) {
	for name, s := range map[string]string{
		"ascii":     "claude-sonnet-4-5-20250929",
		"non-ascii": "équipe données ✓ 日本語のチーム",
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if Problem(s, 256) != "" {
					b.Fatal(s)
				}
			}
		})
	}
}
