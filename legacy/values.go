package legacy

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// parseInteger reads a JSON number literal (as json.Number holds it) as an
// exact int64. Any spelling of an integer value is accepted (100000, 1e5,
// 100000.0); why is "" then, else "negative", "fractional" or "out of range",
// in that order of precedence. Nothing is rounded: 20001.000000000001 is
// fractional, however close to an integer it is.
func parseInteger(lit string) (v int64, why string) {
	if v, err := strconv.ParseInt(lit, 10, 64); err == nil { // the common spelling
		if v < 0 {
			return 0, "negative"
		}
		return v, ""
	}
	neg := strings.HasPrefix(lit, "-")
	s := strings.TrimPrefix(lit, "-")
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	whole, frac, _ := strings.Cut(mant, ".")
	// value = digits * 10^shift, digits without leading or trailing zeros
	digits := strings.TrimLeft(whole+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	shift := len(digits) - len(trimmed) - len(frac)
	digits = trimmed
	if digits == "" {
		return 0, "" // 0, -0, 0.000e7
	}
	if neg {
		return 0, "negative"
	}
	if hasExp {
		e, err := strconv.Atoi(exp)
		if err != nil { // beyond ±2^63: sign decides
			if strings.HasPrefix(exp, "-") {
				return 0, "fractional"
			}
			return 0, "out of range"
		}
		// clamp so that shift+e cannot overflow; ±1e6 is past both bounds
		shift += min(max(e, -1e6), 1e6)
	}
	if shift < 0 {
		return 0, "fractional" // the last digit is not 0
	}
	if len(digits)+shift > 19 { // MaxInt64 has 19 digits
		return 0, "out of range"
	}
	u, err := strconv.ParseUint(digits+strings.Repeat("0", shift), 10, 63)
	if err != nil {
		return 0, "out of range"
	}
	return int64(u), ""
}

// minTime is the earliest instant accepted in a legacy file; maxWindowStart
// the latest usage window start (the last instant Unix nanoseconds hold).
var (
	minTime        = time.Unix(0, 0).UTC()
	maxWindowStart = time.Unix(0, math.MaxInt64).UTC()
)

// parseTimestamp reads an RFC 3339 timestamp, in UTC: exactly
//
//	YYYY-MM-DDTHH:MM:SS[.F](Z|+HH:MM|-HH:MM)
//
// with 1 to 9 digits of fractional seconds F, an upper-case T and Z, and a
// valid date, time and offset. Anything else (no zone, a space for T, a
// date alone, a +0100 offset, a leap second) is unparsable: ok is false.
func parseTimestamp(s string) (t time.Time, ok bool) {
	const shape = "dddd-dd-ddTdd:dd:dd"
	if len(s) < len(shape)+1 {
		return time.Time{}, false
	}
	for i := range len(shape) {
		if shape[i] == 'd' && !isDigit(s[i]) || shape[i] != 'd' && s[i] != shape[i] {
			return time.Time{}, false
		}
	}
	rest := s[len(shape):]
	if rest[0] == '.' {
		n := 1
		for n < len(rest) && isDigit(rest[n]) {
			n++
		}
		if n == 1 || n > 10 {
			return time.Time{}, false
		}
		rest = rest[n:]
	}
	switch {
	case rest == "Z":
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' &&
		isDigit(rest[1]) && isDigit(rest[2]) && isDigit(rest[4]) && isDigit(rest[5]) &&
		rest[1:3] <= "23" && rest[4:6] <= "59":
	default:
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s) // checks the ranges of the fields
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// echo is s as a reason may quote it: only when it cannot be a secret or a
// control sequence (short, and made of the characters of numbers and
// timestamps only); else "".
func echo(s string) string {
	if len(s) == 0 || len(s) > 40 {
		return ""
	}
	for i := range len(s) {
		if !isDigit(s[i]) && !strings.ContainsRune("-+:.,/ TZtzEe", rune(s[i])) {
			return ""
		}
	}
	return s
}

// clip shortens a name or field name from the file for a report: at most
// 64 bytes, cut at a rune boundary, "..." marking the cut.
func clip(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && s[cut]&0xC0 == 0x80 { // continuation byte
		cut--
	}
	return s[:cut] + "..."
}
