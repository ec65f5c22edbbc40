package text

import "testing"

func TestProblem(t *testing.T) {
	for s, want := range map[string]string{
		"team":   "",
		"é":      "",
		"abcdef": "is 6 bytes long, more than 5",
		"a\x01b": "holds the control character U+0001",
		"a\tb":   "holds the control character U+0009",
		"\xff":   "is not valid UTF-8",
	} {
		if got := Problem(s, 5); got != want {
			t.Errorf("Problem(%q) = %q, want %q", s, got, want)
		}
	}
}
