// Package legacytest makes the legacy key files that the tests of package
// legacy (the parser) and of package migrate (the import) read: entries
// with fields replaced, large generated files, and the table of malformed
// files with what the parser says of each.
package legacytest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Secret is the secret of the entries built by EntryJSON; no output may hold it.
const Secret = "pk_live_5ec4e7a1b2c3d4e5f60718293a4b5c6d"

// Del, as the value of a field given to EntryJSON, leaves the field out.
const Del = "\x00del"

// baseEntry is a valid entry, in field order.
var baseEntry = [][2]string{
	{"key", `"` + Secret + `"`},
	{"name", `"team-a"`},
	{"model", `"glm-4.7"`},
	{"token_limit_per_5h", `100000`},
	{"expiry_date", `"2027-01-01T00:00:00Z"`},
	{"created_at", `"2026-01-17T18:56:50.677Z"`},
	{"last_used", `"2026-01-18T09:12:03.004Z"`},
	{"total_lifetime_tokens", `1234567`},
	{"usage_windows", `[{"window_start":"2026-01-18T08:00:00.000Z","tokens_used":902}]`},
}

// EntryJSON is baseEntry with fields replaced, deleted (value del) or added
// at the end, given as name, raw JSON value pairs.
func EntryJSON(overrides ...string) string {
	if len(overrides)%2 != 0 {
		panic("EntryJSON: odd overrides")
	}
	fields := append([][2]string(nil), baseEntry...)
next:
	for i := 0; i < len(overrides); i += 2 {
		name, value := overrides[i], overrides[i+1]
		for j := range fields {
			if fields[j][0] == name {
				fields[j][1] = value
				continue next
			}
		}
		fields = append(fields, [2]string{name, value})
	}
	var parts []string
	for _, f := range fields {
		if f[1] != Del {
			parts = append(parts, fmt.Sprintf("%q:%s", f[0], f[1]))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// FileJSON is a legacy file of the given entries.
func FileJSON(entries ...string) string {
	return `{"keys":[` + strings.Join(entries, ",") + `]}`
}

// IssueStrings renders issues with their String (legacy.Issue.String).
func IssueStrings[I fmt.Stringer](issues []I) []string {
	var out []string
	for _, i := range issues {
		out = append(out, i.String())
	}
	return out
}

// ReportTexts is every text a report (a legacy.Report) and its error can
// show.
func ReportTexts(t testing.TB, rep interface{ Summary() string }, err error) string {
	t.Helper()
	js, jerr := json.Marshal(rep)
	require.NoError(t, jerr)
	text := string(js) + "\n" + rep.Summary() + "\n" + fmt.Sprintf("%v %+v %#v", rep, rep, rep)
	if err != nil {
		text += "\n" + err.Error()
	}
	return text
}

// Case is a legacy file and exactly what legacy.Parse says of it: the
// issues as Issue.String renders them.
type Case struct {
	Name    string
	In      string
	Keys    int // keys imported, when not refused
	Refused []string
	Skipped []string
	Notes   []string
}

// Cases is one case per malformed (or odd) file of LEGACY.md and more.
func Cases() []Case {
	return slices.Concat(fileCases(), entryCases(), keyCases(), nameCases(), limitCases(), lifetimeCases(),
		dateCases(), windowCases(), cacheCases(), duplicateCases())
}

// What the cases' issues and files share.
const (
	other   = `"pk_live_0th3r0th3r0th3r0th3r0th3r0th3r"`
	wantRFC = ": want RFC 3339 such as 2026-01-18T08:00:00Z or 2026-01-18T09:00:00.000+01:00"
	k0      = `keys[0] "team-a": `
	k1      = `keys[1] "team-a": `
)

// valid is a file of one valid entry.
var valid = FileJSON(EntryJSON())

// fileCases are the cases of the file.
func fileCases() []Case {
	return []Case{
		{Name: "valid", In: valid, Keys: 1},
		{Name: "no keys", In: `{"keys":[]}`},
		{Name: "empty file", In: ``, Refused: []string{`empty file: want an object {"keys": [...]}`}},
		{Name: "white space only", In: " \n\t ", Refused: []string{`empty file: want an object {"keys": [...]}`}},
		{Name: "not JSON", In: `pk_live_5ec4e7a1b2c3d4e5f60718293a4b5c6d`,
			Refused: []string{`invalid JSON near byte 1: invalid character 'p' looking for beginning of value`}},
		{Name: "cut short", In: valid[:60], Refused: []string{`keys[0]: unexpected end of file: the JSON is cut short`}},
		{Name: "syntax error in an entry", In: `{"keys":[{"name":"a" "key":1}]}`,
			Refused: []string{`keys[0] "a": invalid JSON near byte 21: invalid character '"' after object key:value pair`}},
		{Name: "trailing garbage", In: valid + "\n}x",
			Refused: []string{fmt.Sprintf("data after the top-level object, which ends at byte %d", len(valid))}},
		{Name: "two objects", In: `{"keys":[]} {"keys":[]}`, Refused: []string{`data after the top-level object, which ends at byte 11`}},
		{Name: "trailing white space", In: "{\"keys\":[]}\n\n \t"},
		{Name: "byte order mark", In: "\xEF\xBB\xBF" + FileJSON(EntryJSON()), Keys: 1,
			Notes: []string{`starts with a UTF-8 byte order mark, ignored`}},
		{Name: "top level is an array", In: `[` + EntryJSON() + `]`, Refused: []string{`the file holds an array: want an object {"keys": [...]}`}},
		{Name: "top level is null", In: `null`, Refused: []string{`the file holds null: want an object {"keys": [...]}`}},
		{Name: "keys missing", In: `{}`, Refused: []string{`keys: missing: want {"keys": [...]}`}},
		{Name: "keys null", In: `{"keys":null}`, Refused: []string{`keys: null: want {"keys": [...]}`}},
		{Name: "keys not an array", In: `{"keys":{"team-a":` + EntryJSON() + `}}`,
			Refused: []string{`keys: want an array of keys, got an object`}},
		{Name: "keys twice", In: `{"keys":[],"keys":[]}`, Refused: []string{`keys: appears twice in one object`}},
		{Name: "unknown top-level field", In: `{"version":2,"keys":[` + EntryJSON() + `]}`, Keys: 1,
			Notes: []string{`version: unknown top-level field, ignored`}},
	}
}

// entryCases are the cases of an entry.
func entryCases() []Case {
	return []Case{
		{Name: "entry not an object", In: FileJSON(`"`+Secret+`"`, `42`, `null`, `[]`),
			Refused: []string{`keys[0]: want an object, got a string`, `keys[1]: want an object, got a number`,
				`keys[2]: want an object, got null`, `keys[3]: want an object, got an array`}},
		{Name: "empty object", In: FileJSON(`{}`),
			Refused: []string{`keys[0]: key: missing: every key needs its secret`, `keys[0]: token_limit_per_5h: missing: want a positive integer`},
			Notes: []string{`keys[0]: name: missing: imported without a name`, `keys[0]: model: missing: imported without a model`,
				`keys[0]: expiry_date: missing: the key never expires`, `keys[0]: created_at: missing: imported without a creation time`,
				`keys[0]: total_lifetime_tokens: missing: lifetime usage starts at 0`, `keys[0]: usage_windows: missing: no usage to carry over`}},
		{Name: "unknown fields", In: FileJSON(EntryJSON("owner", `"ops"`, "tags", `{"a":[1,{"b":null}]}`)), Keys: 1,
			Notes: []string{k0 + `owner: unknown field, ignored`, k0 + `tags: unknown field, ignored`}},
		{Name: "field twice", In: FileJSON(EntryJSON("token_limit_per_5h", `100000,"token_limit_per_5h":1`)),
			Refused: []string{k0 + `token_limit_per_5h: appears twice in one object`}},
	}
}

// keyCases are the cases of key, the secret.
func keyCases() []Case {
	return []Case{
		{Name: "key missing", In: FileJSON(EntryJSON("key", Del)), Refused: []string{k0 + `key: missing: every key needs its secret`}},
		{Name: "key null", In: FileJSON(EntryJSON("key", `null`)), Refused: []string{k0 + `key: null: every key needs its secret`}},
		{Name: "key empty", In: FileJSON(EntryJSON("key", `""`)), Refused: []string{k0 + `key: empty or blank`}},
		{Name: "key blank", In: FileJSON(EntryJSON("key", `" \t"`)), Refused: []string{k0 + `key: empty or blank`}},
		{Name: "key not a string", In: FileJSON(EntryJSON("key", `12345678901234567890`)), Refused: []string{k0 + `key: want a string, got a number`}},
		{Name: "key with invalid UTF-8", In: FileJSON(EntryJSON("key", "\"pk_live_\xff\xfe\"")),
			Refused: []string{k0 + `key: holds invalid UTF-8 or U+FFFD: the secret could not be kept exactly`}},
	}
}

// nameCases are the cases of name and model.
func nameCases() []Case {
	return []Case{
		{Name: "name missing", In: FileJSON(EntryJSON("name", Del)), Keys: 1, Notes: []string{`keys[0]: name: missing: imported without a name`}},
		{Name: "name null", In: FileJSON(EntryJSON("name", `null`)), Keys: 1, Notes: []string{`keys[0]: name: null: imported without a name`}},
		{Name: "name empty", In: FileJSON(EntryJSON("name", `""`)), Keys: 1, Notes: []string{`keys[0]: name: empty: imported without a name`}},
		{Name: "name not a string", In: FileJSON(EntryJSON("name", `7`)), Refused: []string{`keys[0]: name: want a string, got a number`}},
		{Name: "name is the secret", In: FileJSON(EntryJSON("name", `"`+Secret+`"`)),
			Refused: []string{`keys[0] "[redacted]": name: holds the secret, which would be stored in plain text`}},
		{Name: "name holds the secret", In: FileJSON(EntryJSON("name", `"team-a `+Secret+`"`)),
			Refused: []string{`keys[0] "[redacted]": name: holds the secret, which would be stored in plain text`}},
		{Name: "long name clipped", In: FileJSON(EntryJSON("name", `"`+strings.Repeat("n", 70)+`"`, "x", "1")), Keys: 1,
			Notes: []string{`keys[0] "` + strings.Repeat("n", 64) + `...": x: unknown field, ignored`}},
		{Name: "model missing", In: FileJSON(EntryJSON("model", Del)), Keys: 1, Notes: []string{k0 + `model: missing: imported without a model`}},
		{Name: "model null", In: FileJSON(EntryJSON("model", `null`)), Keys: 1, Notes: []string{k0 + `model: null: imported without a model`}},
		{Name: "model empty", In: FileJSON(EntryJSON("model", `""`)), Keys: 1, Notes: []string{k0 + `model: empty: imported without a model`}},
		{Name: "model not a string", In: FileJSON(EntryJSON("model", `["glm-4.7"]`)), Refused: []string{k0 + `model: want a string, got an array`}},
		{Name: "model holds the secret", In: FileJSON(EntryJSON("model", `"`+Secret+`"`)),
			Refused: []string{k0 + `model: holds the secret, which would be stored in plain text`}},
	}
}

// limitCases are the cases of token_limit_per_5h.
func limitCases() []Case {
	return []Case{
		{Name: "limit missing", In: FileJSON(EntryJSON("token_limit_per_5h", Del)), Refused: []string{k0 + `token_limit_per_5h: missing: want a positive integer`}},
		{Name: "limit null", In: FileJSON(EntryJSON("token_limit_per_5h", `null`)), Refused: []string{k0 + `token_limit_per_5h: null: want a positive integer`}},
		{Name: "limit zero", In: FileJSON(EntryJSON("token_limit_per_5h", `0`)), Refused: []string{k0 + `token_limit_per_5h: zero: got 0, want a positive integer`}},
		{Name: "limit negative", In: FileJSON(EntryJSON("token_limit_per_5h", `-100`)), Refused: []string{k0 + `token_limit_per_5h: negative: got -100, want a positive integer`}},
		{Name: "limit fractional", In: FileJSON(EntryJSON("token_limit_per_5h", `1000.5`)), Refused: []string{k0 + `token_limit_per_5h: fractional: got 1000.5, want a positive integer`}},
		{Name: "limit huge", In: FileJSON(EntryJSON("token_limit_per_5h", `9223372036854775808`)),
			Refused: []string{k0 + `token_limit_per_5h: out of range: got 9223372036854775808, want a positive integer`}},
		{Name: "limit huge exponent", In: FileJSON(EntryJSON("token_limit_per_5h", `1e400`)), Refused: []string{k0 + `token_limit_per_5h: out of range: got 1e400, want a positive integer`}},
		{Name: "limit a string", In: FileJSON(EntryJSON("token_limit_per_5h", `"100000"`)), Refused: []string{k0 + `token_limit_per_5h: want a positive integer, got a string`}},
		{Name: "limit as 1e5 and 1.0e5", In: FileJSON(EntryJSON("token_limit_per_5h", `1e5`), EntryJSON("key", other, "token_limit_per_5h", `100000.0`)), Keys: 2,
			Notes: []string{`keys[1] "team-a": name: also the name of keys[0]`}},
	}
}

// lifetimeCases are the cases of total_lifetime_tokens.
func lifetimeCases() []Case {
	return []Case{
		{Name: "lifetime missing", In: FileJSON(EntryJSON("total_lifetime_tokens", Del)), Keys: 1,
			Notes: []string{k0 + `total_lifetime_tokens: missing: lifetime usage starts at 0`}},
		{Name: "lifetime null", In: FileJSON(EntryJSON("total_lifetime_tokens", `null`)), Keys: 1,
			Notes: []string{k0 + `total_lifetime_tokens: null: lifetime usage starts at 0`}},
		{Name: "lifetime zero", In: FileJSON(EntryJSON("total_lifetime_tokens", `0`, "usage_windows", `[]`)), Keys: 1},
		{Name: "lifetime below the windows", In: FileJSON(EntryJSON("total_lifetime_tokens", `900`)), Keys: 1,
			Notes: []string{k0 + `total_lifetime_tokens: 900, less than the 902 tokens_used of usage_windows: kept as is`}},
		{Name: "lifetime negative", In: FileJSON(EntryJSON("total_lifetime_tokens", `-1`)), Refused: []string{k0 + `total_lifetime_tokens: negative: got -1, want a non-negative integer`}},
		{Name: "lifetime fractional", In: FileJSON(EntryJSON("total_lifetime_tokens", `2.5e0`)), Refused: []string{k0 + `total_lifetime_tokens: fractional: got 2.5e0, want a non-negative integer`}},
		{Name: "lifetime huge", In: FileJSON(EntryJSON("total_lifetime_tokens", strings.Repeat("9", 50))),
			Refused: []string{k0 + `total_lifetime_tokens: out of range: got a number of 50 characters, want a non-negative integer`}},
	}
}

// dateCases are the cases of dates.
func dateCases() []Case {
	return []Case{
		{Name: "expiry missing", In: FileJSON(EntryJSON("expiry_date", Del)), Keys: 1, Notes: []string{k0 + `expiry_date: missing: the key never expires`}},
		{Name: "expiry null", In: FileJSON(EntryJSON("expiry_date", `null`)), Keys: 1, Notes: []string{k0 + `expiry_date: null: the key never expires`}},
		{Name: "expiry empty", In: FileJSON(EntryJSON("expiry_date", `""`)), Refused: []string{k0 + `expiry_date: unparsable timestamp` + wantRFC}},
		{Name: "expiry bad month", In: FileJSON(EntryJSON("expiry_date", `"2027-13-01T00:00:00Z"`)),
			Refused: []string{k0 + `expiry_date: unparsable timestamp "2027-13-01T00:00:00Z"` + wantRFC}},
		{Name: "expiry a date alone", In: FileJSON(EntryJSON("expiry_date", `"2027-01-01"`)),
			Refused: []string{k0 + `expiry_date: unparsable timestamp "2027-01-01"` + wantRFC}},
		{Name: "expiry in words", In: FileJSON(EntryJSON("expiry_date", `"next year"`)), Refused: []string{k0 + `expiry_date: unparsable timestamp` + wantRFC}},
		{Name: "expiry epoch milliseconds", In: FileJSON(EntryJSON("expiry_date", `1798761600000`)), Refused: []string{k0 + `expiry_date: want a string, got a number`}},
		{Name: "expiry far future", In: FileJSON(EntryJSON("expiry_date", `"9999-12-31T23:59:59.999Z"`)), Keys: 1},
		{Name: "created before 1970", In: FileJSON(EntryJSON("created_at", `"1969-12-31T23:59:59Z"`)), Refused: []string{k0 + `created_at: before 1970-01-01T00:00:00Z`}},
		{Name: "created missing", In: FileJSON(EntryJSON("created_at", Del)), Keys: 1, Notes: []string{k0 + `created_at: missing: imported without a creation time`}},
		{Name: "created no zone", In: FileJSON(EntryJSON("created_at", `"2026-01-17T18:56:50.677"`)),
			Refused: []string{k0 + `created_at: unparsable timestamp "2026-01-17T18:56:50.677"` + wantRFC}},
		{Name: "last_used missing", In: FileJSON(EntryJSON("last_used", Del)), Keys: 1},
		{Name: "last_used null", In: FileJSON(EntryJSON("last_used", `null`)), Keys: 1},
		{Name: "last_used with a space", In: FileJSON(EntryJSON("last_used", `"2026-01-18 09:12:03Z"`)),
			Refused: []string{k0 + `last_used: unparsable timestamp "2026-01-18 09:12:03Z"` + wantRFC}},
	}
}

// windowCases are the cases of usage_windows.
func windowCases() []Case {
	return []Case{
		{Name: "windows missing", In: FileJSON(EntryJSON("usage_windows", Del)), Keys: 1, Notes: []string{k0 + `usage_windows: missing: no usage to carry over`}},
		{Name: "windows null", In: FileJSON(EntryJSON("usage_windows", `null`)), Keys: 1, Notes: []string{k0 + `usage_windows: null: no usage to carry over`}},
		{Name: "windows empty", In: FileJSON(EntryJSON("usage_windows", `[]`)), Keys: 1},
		{Name: "windows an object", In: FileJSON(EntryJSON("usage_windows", `{"window_start":"2026-01-18T08:00:00Z","tokens_used":1}`)),
			Refused: []string{k0 + `usage_windows: want an array of windows, got an object`}},
		{Name: "window not an object", In: FileJSON(EntryJSON("usage_windows", `[902, null]`)),
			Refused: []string{k0 + `usage_windows[0]: want an object, got a number`, k0 + `usage_windows[1]: want an object, got null`}},
		{Name: "window empty object", In: FileJSON(EntryJSON("usage_windows", `[{}]`)),
			Refused: []string{k0 + `usage_windows[0].window_start: missing`, k0 + `usage_windows[0].tokens_used: missing`}},
		{Name: "window fields null", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":null,"tokens_used":null}]`)),
			Refused: []string{k0 + `usage_windows[0].window_start: null`, k0 + `usage_windows[0].tokens_used: null`}},
		{Name: "tokens negative", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":5},{"window_start":"2026-01-18T09:00:00Z","tokens_used":-5}]`)),
			Refused: []string{k0 + `usage_windows[1].tokens_used: negative: got -5, want a non-negative integer`}},
		{Name: "tokens fractional", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":902.25}]`)),
			Refused: []string{k0 + `usage_windows[0].tokens_used: fractional: got 902.25, want a non-negative integer`}},
		{Name: "tokens nearly integer", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":20001.000000000001}]`)),
			Refused: []string{k0 + `usage_windows[0].tokens_used: fractional: got 20001.000000000001, want a non-negative integer`}},
		{Name: "tokens a string", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":"902"}]`)),
			Refused: []string{k0 + `usage_windows[0].tokens_used: want a non-negative integer, got a string`}},
		{Name: "tokens huge", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":1e19}]`)),
			Refused: []string{k0 + `usage_windows[0].tokens_used: out of range: got 1e19, want a non-negative integer`}},
		{Name: "tokens add up past int64", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":9223372036854775807},{"window_start":"2026-01-18T09:00:00Z","tokens_used":1}]`)),
			Refused: []string{k0 + `usage_windows: the tokens_used add up to more than 2^63-1`}},
		{Name: "tokens zero", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":0}]`)), Keys: 1},
		{Name: "window start unparsable", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00.000+0100","tokens_used":1}]`)),
			Refused: []string{k0 + `usage_windows[0].window_start: unparsable timestamp "2026-01-18T08:00:00.000+0100"` + wantRFC}},
		{Name: "window start epoch milliseconds", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":1768723200000,"tokens_used":1}]`)),
			Refused: []string{k0 + `usage_windows[0].window_start: want a string, got a number`}},
		{Name: "window start past Unix nanoseconds", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2300-01-01T00:00:00Z","tokens_used":1}]`)),
			Refused: []string{k0 + `usage_windows[0].window_start: after 2262-04-11T23:47:16Z, the last instant a window can start`}},
		{Name: "window field twice", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":1,"tokens_used":2}]`)),
			Refused: []string{k0 + `usage_windows[0].tokens_used: appears twice in one object`}},
		{Name: "window unknown fields", In: FileJSON(EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":1,"model":"x"},{"model":"y","window_start":"2026-01-18T09:00:00Z","tokens_used":1,"cost":0.1}]`)), Keys: 1,
			Notes: []string{k0 + `usage_windows[*].cost: unknown field in 1 window, ignored`, k0 + `usage_windows[*].model: unknown field in 2 windows, ignored`}},
	}
}

// cacheCases are the cases of rolling_window_cache.
func cacheCases() []Case {
	return []Case{
		{Name: "cache ignored", In: FileJSON(EntryJSON("rolling_window_cache", `{"buckets":[{"timestamp":1768723200000,"tokens":1804}],"runningTotal":1804}`)), Keys: 1,
			Notes: []string{k0 + `rolling_window_cache: ignored: usage_windows is the source of truth`}},
		{Name: "cache malformed, still ignored", In: FileJSON(EntryJSON("rolling_window_cache", `"corrupt"`)), Keys: 1,
			Notes: []string{k0 + `rolling_window_cache: ignored: usage_windows is the source of truth`}},
		{Name: "cache null", In: FileJSON(EntryJSON("rolling_window_cache", `null`)), Keys: 1},
	}
}

// duplicateCases are the cases of duplicates.
func duplicateCases() []Case {
	return []Case{
		{Name: "exact duplicate", In: FileJSON(EntryJSON(), EntryJSON()), Keys: 1,
			Skipped: []string{k1 + `exact duplicate of keys[0], left out`}},
		{Name: "exact duplicate, spelled differently", In: FileJSON(EntryJSON(), EntryJSON(
			"expiry_date", `"2027-01-01T01:00:00+01:00"`, "token_limit_per_5h", `1e5`, "owner", `"x"`, "rolling_window_cache", `{}`,
			"usage_windows", `[{"tokens_used":902,"window_start":"2026-01-18T08:00:00Z"}]`)), Keys: 1,
			Skipped: []string{k1 + `exact duplicate of keys[0], left out`},
			Notes:   []string{k1 + `owner: unknown field, ignored`, k1 + `rolling_window_cache: ignored: usage_windows is the source of truth`}},
		{Name: "conflicting duplicate", In: FileJSON(EntryJSON(), EntryJSON("token_limit_per_5h", `200000`)),
			Refused: []string{k1 + `key: same secret as keys[0], but token_limit_per_5h differs`}},
		{Name: "conflicting duplicate windows", In: FileJSON(EntryJSON(), EntryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":903}]`)),
			Refused: []string{k1 + `key: same secret as keys[0], but usage_windows[0] differs`}},
		{Name: "conflicting duplicate, other name", In: FileJSON(EntryJSON(), EntryJSON("name", `"team-b"`)),
			Refused: []string{`keys[1] "team-b": key: same secret as keys[0], but name differs`}},
		{Name: "duplicate with problems of its own", In: FileJSON(EntryJSON(), EntryJSON("token_limit_per_5h", `0`)),
			Refused: []string{k1 + `token_limit_per_5h: zero: got 0, want a positive integer`,
				k1 + `key: same secret as keys[0]; not compared, as this entry has other problems`}},
		{Name: "one name, two secrets", In: FileJSON(EntryJSON(), EntryJSON("key", other)), Keys: 2,
			Notes: []string{k1 + `name: also the name of keys[0]`}},
		{Name: "every problem listed", In: FileJSON(EntryJSON("token_limit_per_5h", `0`), EntryJSON("key", other, "usage_windows", `[{"window_start":"x","tokens_used":-1}]`)),
			Refused: []string{k0 + `token_limit_per_5h: zero: got 0, want a positive integer`,
				k1 + `usage_windows[0].window_start: unparsable timestamp` + wantRFC,
				k1 + `usage_windows[0].tokens_used: negative: got -1, want a non-negative integer`},
			Notes: []string{k1 + `name: also the name of keys[0]`}},
	}
}

// GenWindowStart is the start of window i of a generated file: one window
// every 5 minutes, back from 2026-01-18T12:00:00Z.
func GenWindowStart(i int) time.Time {
	return time.Date(2026, 1, 18, 12, 0, 0, 0, time.UTC).Add(-time.Duration(i) * 5 * time.Minute)
}

// GenTokens is the tokens_used of window i of a generated file.
func GenTokens(i int) int64 { return int64(i%1000) * 7 }

// GenFile is a legacy file of one key with n usage windows, pretty-printed
// as the legacy writer did, timestamps in the three spellings in turn.
func GenFile(n int) []byte {
	var b bytes.Buffer
	b.WriteString("{\n  \"keys\": [\n    {\n      \"key\": \"" + Secret + "\",\n")
	b.WriteString("      \"name\": \"long-lived\",\n      \"model\": \"glm-4.7\",\n      \"token_limit_per_5h\": 100000,\n")
	b.WriteString("      \"created_at\": \"2025-01-01T00:00:00.000Z\",\n      \"total_lifetime_tokens\": 9000000000,\n")
	b.WriteString("      \"expiry_date\": \"2027-01-01T00:00:00Z\",\n      \"usage_windows\": [")
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		start := GenWindowStart(i)
		var s string
		switch i % 3 {
		case 0:
			s = start.Format("2006-01-02T15:04:05.000Z07:00") // milliseconds, Z
		case 1:
			s = start.Format(time.RFC3339) // no fraction
		default:
			s = start.In(time.FixedZone("", 90*60)).Format("2006-01-02T15:04:05.000-07:00") // offset
		}
		fmt.Fprintf(&b, "\n        { \"window_start\": %q, \"tokens_used\": %d }", s, GenTokens(i))
	}
	b.WriteString("\n      ]\n    }\n  ]\n}\n")
	return b.Bytes()
}

// Time is the instant of an RFC 3339 timestamp, in UTC.
func Time(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}
