package pricing

import "strings"

// Lookup returns the price of model and the table's name for it, or false
// when no entry matches. It tries, in order, and stops at the first step
// that finds an entry:
//
//  1. the name exactly as given;
//  2. the same bare name: the text after the last '/', compared without
//     regard to case, on both sides. "openai/gpt-4o" finds "gpt-4o",
//     "gemini-2.5-pro" finds "gemini/gemini-2.5-pro", "GPT-4o" finds
//     "gpt-4o";
//  3. the request's family as a bare name: its bare name without version
//     suffixes (below). "gpt-4o-2024-08-06" finds "gpt-4o",
//     "claude-sonnet-4-20250514" finds "claude-sonnet-4";
//  4. the same family on both sides: "claude-sonnet-4" and
//     "claude-sonnet-4-0" find "claude-sonnet-4-20250514",
//     "claude-3-5-sonnet@20240620" finds "claude-3-5-sonnet-20240620".
//
// A version suffix is, at the end of the name, one of: "-YYYY-MM-DD",
// "-YYYYMMDD" or "@YYYYMMDD" (a plausible date), "-MMDD" (a plausible month
// and day, OpenAI's "gpt-4-0613"), "-0NN" or "@0NN" (three digits starting
// with 0, Google's "-001"), "-latest" or "@latest", and "-0" (Anthropic's
// "claude-opus-4-0" for 4.0). Suffixes are removed repeatedly, and nothing
// else is: a name never matches another by prefix, so "gpt-4o-mini" does
// not find "gpt-4o", "gpt-4" does not find "gpt-4o", and
// "claude-sonnet-4-5" does not find "claude-sonnet-4".
//
// When a step finds several entries (the same bare name under several
// providers, or several dated versions of one family), it takes the one
// without a provider prefix if there is one, else the first in sorted order,
// so that a lookup's answer depends on the table alone.
func (t *Table) Lookup(model string) (Price, string, bool) {
	if t == nil {
		return Price{}, "", false
	}
	if p, ok := t.prices[model]; ok {
		return p, model, true
	}
	b := bareName(strings.ToLower(model))
	f := familyName(b)
	for _, names := range [...][]string{t.bare[b], t.bare[f], t.family[f]} {
		if len(names) > 0 {
			return t.prices[names[0]], names[0], true
		}
	}
	return Price{}, "", false
}

// bareName returns name without its provider prefixes: the text after the
// last '/'.
func bareName(name string) string {
	return name[strings.LastIndexByte(name, '/')+1:]
}

// familyName returns name without its version suffixes, as Lookup
// documents them.
func familyName(name string) string {
	for {
		short := trimVersion(name)
		if short == name {
			return name
		}
		name = short
	}
}

// trimVersion removes one version suffix from the end of name, if it has
// one and something is left before it.
func trimVersion(name string) string {
	if n := len(name) - len("-2024-08-06"); n > 0 {
		if d := name[n:]; d[0] == '-' && d[5] == '-' && d[8] == '-' && isDate(d[1:5]+d[6:8]+d[9:]) {
			return name[:n]
		}
	}
	i := strings.LastIndexAny(name, "-@")
	if i <= 0 {
		return name
	}
	suffix := name[i+1:]
	switch {
	case suffix == "latest",
		len(suffix) == 8 && isDate(suffix),
		len(suffix) == 3 && suffix[0] == '0' && allDigits(suffix),
		name[i] == '-' && suffix == "0",
		name[i] == '-' && len(suffix) == 4 && isMonthDay(suffix):
		return name[:i]
	}
	return name
}

// isDate reports whether s is a plausible YYYYMMDD date of the 1900s or
// 2000s.
func isDate(s string) bool {
	return len(s) == 8 && allDigits(s) && (s[:2] == "19" || s[:2] == "20") && isMonthDay(s[4:])
}

// isMonthDay reports whether s is MMDD with a month 01-12 and a day 01-31.
func isMonthDay(s string) bool {
	if len(s) != 4 || !allDigits(s) {
		return false
	}
	m := int(s[0]-'0')*10 + int(s[1]-'0')
	d := int(s[2]-'0')*10 + int(s[3]-'0')
	return m >= 1 && m <= 12 && d >= 1 && d <= 31
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
