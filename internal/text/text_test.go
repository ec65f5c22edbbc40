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
