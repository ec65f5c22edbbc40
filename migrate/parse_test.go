package migrate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// legacyCase is a file and exactly what parseLegacy says of it.
type legacyCase struct {
	name    string
	in      string
	keys    int // keys imported, when not refused
	refused []string
	skipped []string
	notes   []string
}

// legacyCases is one case per malformed (or odd) file of LEGACY.md and more.
func legacyCases() []legacyCase {
	const (
		other   = `"pk_live_0th3r0th3r0th3r0th3r0th3r0th3r"`
		wantRFC = ": want RFC 3339 such as 2026-01-18T08:00:00Z or 2026-01-18T09:00:00.000+01:00"
	)
	valid := fileJSON(entryJSON())
	k0 := `keys[0] "team-a": `
	k1 := `keys[1] "team-a": `
	return []legacyCase{
		// the file
		{name: "valid", in: valid, keys: 1},
		{name: "no keys", in: `{"keys":[]}`},
		{name: "empty file", in: ``, refused: []string{`empty file: want an object {"keys": [...]}`}},
		{name: "white space only", in: " \n\t ", refused: []string{`empty file: want an object {"keys": [...]}`}},
		{name: "not JSON", in: `pk_live_5ec4e7a1b2c3d4e5f60718293a4b5c6d`,
			refused: []string{`invalid JSON near byte 1: invalid character 'p' looking for beginning of value`}},
		{name: "cut short", in: valid[:60], refused: []string{`keys[0]: unexpected end of file: the JSON is cut short`}},
		{name: "syntax error in an entry", in: `{"keys":[{"name":"a" "key":1}]}`,
			refused: []string{`keys[0] "a": invalid JSON near byte 21: invalid character '"' after object key:value pair`}},
		{name: "trailing garbage", in: valid + "\n}x",
			refused: []string{fmt.Sprintf("data after the top-level object, which ends at byte %d", len(valid))}},
		{name: "two objects", in: `{"keys":[]} {"keys":[]}`, refused: []string{`data after the top-level object, which ends at byte 11`}},
		{name: "trailing white space", in: "{\"keys\":[]}\n\n \t"},
		{name: "byte order mark", in: "\xEF\xBB\xBF" + fileJSON(entryJSON()), keys: 1,
			notes: []string{`starts with a UTF-8 byte order mark, ignored`}},
		{name: "top level is an array", in: `[` + entryJSON() + `]`, refused: []string{`the file holds an array: want an object {"keys": [...]}`}},
		{name: "top level is null", in: `null`, refused: []string{`the file holds null: want an object {"keys": [...]}`}},
		{name: "keys missing", in: `{}`, refused: []string{`keys: missing: want {"keys": [...]}`}},
		{name: "keys null", in: `{"keys":null}`, refused: []string{`keys: null: want {"keys": [...]}`}},
		{name: "keys not an array", in: `{"keys":{"team-a":` + entryJSON() + `}}`,
			refused: []string{`keys: want an array of keys, got an object`}},
		{name: "keys twice", in: `{"keys":[],"keys":[]}`, refused: []string{`keys: appears twice in one object`}},
		{name: "unknown top-level field", in: `{"version":2,"keys":[` + entryJSON() + `]}`, keys: 1,
			notes: []string{`version: unknown top-level field, ignored`}},

		// an entry
		{name: "entry not an object", in: fileJSON(`"`+secret+`"`, `42`, `null`, `[]`),
			refused: []string{`keys[0]: want an object, got a string`, `keys[1]: want an object, got a number`,
				`keys[2]: want an object, got null`, `keys[3]: want an object, got an array`}},
		{name: "empty object", in: fileJSON(`{}`),
			refused: []string{`keys[0]: key: missing: every key needs its secret`, `keys[0]: token_limit_per_5h: missing: want a positive integer`},
			notes: []string{`keys[0]: name: missing: imported without a name`, `keys[0]: model: missing: imported without a model`,
				`keys[0]: expiry_date: missing: the key never expires`, `keys[0]: created_at: missing: imported without a creation time`,
				`keys[0]: total_lifetime_tokens: missing: lifetime usage starts at 0`, `keys[0]: usage_windows: missing: no usage to carry over`}},
		{name: "unknown fields", in: fileJSON(entryJSON("owner", `"ops"`, "tags", `{"a":[1,{"b":null}]}`)), keys: 1,
			notes: []string{k0 + `owner: unknown field, ignored`, k0 + `tags: unknown field, ignored`}},
		{name: "field twice", in: fileJSON(entryJSON("token_limit_per_5h", `100000,"token_limit_per_5h":1`)),
			refused: []string{k0 + `token_limit_per_5h: appears twice in one object`}},

		// key
		{name: "key missing", in: fileJSON(entryJSON("key", del)), refused: []string{k0 + `key: missing: every key needs its secret`}},
		{name: "key null", in: fileJSON(entryJSON("key", `null`)), refused: []string{k0 + `key: null: every key needs its secret`}},
		{name: "key empty", in: fileJSON(entryJSON("key", `""`)), refused: []string{k0 + `key: empty or blank`}},
		{name: "key blank", in: fileJSON(entryJSON("key", `" \t"`)), refused: []string{k0 + `key: empty or blank`}},
		{name: "key not a string", in: fileJSON(entryJSON("key", `12345678901234567890`)), refused: []string{k0 + `key: want a string, got a number`}},
		{name: "key with invalid UTF-8", in: fileJSON(entryJSON("key", "\"pk_live_\xff\xfe\"")),
			refused: []string{k0 + `key: holds invalid UTF-8 or U+FFFD: the secret could not be kept exactly`}},

		// name and model
		{name: "name missing", in: fileJSON(entryJSON("name", del)), keys: 1, notes: []string{`keys[0]: name: missing: imported without a name`}},
		{name: "name null", in: fileJSON(entryJSON("name", `null`)), keys: 1, notes: []string{`keys[0]: name: null: imported without a name`}},
		{name: "name empty", in: fileJSON(entryJSON("name", `""`)), keys: 1, notes: []string{`keys[0]: name: empty: imported without a name`}},
		{name: "name not a string", in: fileJSON(entryJSON("name", `7`)), refused: []string{`keys[0]: name: want a string, got a number`}},
		{name: "name is the secret", in: fileJSON(entryJSON("name", `"`+secret+`"`)),
			refused: []string{`keys[0] "[redacted]": name: holds the secret, which would be stored in plain text`}},
		{name: "name holds the secret", in: fileJSON(entryJSON("name", `"team-a `+secret+`"`)),
			refused: []string{`keys[0] "[redacted]": name: holds the secret, which would be stored in plain text`}},
		{name: "long name clipped", in: fileJSON(entryJSON("name", `"`+strings.Repeat("n", 70)+`"`, "x", "1")), keys: 1,
			notes: []string{`keys[0] "` + strings.Repeat("n", 64) + `...": x: unknown field, ignored`}},
		{name: "model missing", in: fileJSON(entryJSON("model", del)), keys: 1, notes: []string{k0 + `model: missing: imported without a model`}},
		{name: "model null", in: fileJSON(entryJSON("model", `null`)), keys: 1, notes: []string{k0 + `model: null: imported without a model`}},
		{name: "model empty", in: fileJSON(entryJSON("model", `""`)), keys: 1, notes: []string{k0 + `model: empty: imported without a model`}},
		{name: "model not a string", in: fileJSON(entryJSON("model", `["glm-4.7"]`)), refused: []string{k0 + `model: want a string, got an array`}},
		{name: "model holds the secret", in: fileJSON(entryJSON("model", `"`+secret+`"`)),
			refused: []string{k0 + `model: holds the secret, which would be stored in plain text`}},

		// token_limit_per_5h
		{name: "limit missing", in: fileJSON(entryJSON("token_limit_per_5h", del)), refused: []string{k0 + `token_limit_per_5h: missing: want a positive integer`}},
		{name: "limit null", in: fileJSON(entryJSON("token_limit_per_5h", `null`)), refused: []string{k0 + `token_limit_per_5h: null: want a positive integer`}},
		{name: "limit zero", in: fileJSON(entryJSON("token_limit_per_5h", `0`)), refused: []string{k0 + `token_limit_per_5h: zero: got 0, want a positive integer`}},
		{name: "limit negative", in: fileJSON(entryJSON("token_limit_per_5h", `-100`)), refused: []string{k0 + `token_limit_per_5h: negative: got -100, want a positive integer`}},
		{name: "limit fractional", in: fileJSON(entryJSON("token_limit_per_5h", `1000.5`)), refused: []string{k0 + `token_limit_per_5h: fractional: got 1000.5, want a positive integer`}},
		{name: "limit huge", in: fileJSON(entryJSON("token_limit_per_5h", `9223372036854775808`)),
			refused: []string{k0 + `token_limit_per_5h: out of range: got 9223372036854775808, want a positive integer`}},
		{name: "limit huge exponent", in: fileJSON(entryJSON("token_limit_per_5h", `1e400`)), refused: []string{k0 + `token_limit_per_5h: out of range: got 1e400, want a positive integer`}},
		{name: "limit a string", in: fileJSON(entryJSON("token_limit_per_5h", `"100000"`)), refused: []string{k0 + `token_limit_per_5h: want a positive integer, got a string`}},
		{name: "limit as 1e5 and 1.0e5", in: fileJSON(entryJSON("token_limit_per_5h", `1e5`), entryJSON("key", other, "token_limit_per_5h", `100000.0`)), keys: 2,
			notes: []string{`keys[1] "team-a": name: also the name of keys[0]`}},

		// total_lifetime_tokens
		{name: "lifetime missing", in: fileJSON(entryJSON("total_lifetime_tokens", del)), keys: 1,
			notes: []string{k0 + `total_lifetime_tokens: missing: lifetime usage starts at 0`}},
		{name: "lifetime null", in: fileJSON(entryJSON("total_lifetime_tokens", `null`)), keys: 1,
			notes: []string{k0 + `total_lifetime_tokens: null: lifetime usage starts at 0`}},
		{name: "lifetime zero", in: fileJSON(entryJSON("total_lifetime_tokens", `0`, "usage_windows", `[]`)), keys: 1},
		{name: "lifetime below the windows", in: fileJSON(entryJSON("total_lifetime_tokens", `900`)), keys: 1,
			notes: []string{k0 + `total_lifetime_tokens: 900, less than the 902 tokens_used of usage_windows: kept as is`}},
		{name: "lifetime negative", in: fileJSON(entryJSON("total_lifetime_tokens", `-1`)), refused: []string{k0 + `total_lifetime_tokens: negative: got -1, want a non-negative integer`}},
		{name: "lifetime fractional", in: fileJSON(entryJSON("total_lifetime_tokens", `2.5e0`)), refused: []string{k0 + `total_lifetime_tokens: fractional: got 2.5e0, want a non-negative integer`}},
		{name: "lifetime huge", in: fileJSON(entryJSON("total_lifetime_tokens", strings.Repeat("9", 50))),
			refused: []string{k0 + `total_lifetime_tokens: out of range: got a number of 50 characters, want a non-negative integer`}},

		// dates
		{name: "expiry missing", in: fileJSON(entryJSON("expiry_date", del)), keys: 1, notes: []string{k0 + `expiry_date: missing: the key never expires`}},
		{name: "expiry null", in: fileJSON(entryJSON("expiry_date", `null`)), keys: 1, notes: []string{k0 + `expiry_date: null: the key never expires`}},
		{name: "expiry empty", in: fileJSON(entryJSON("expiry_date", `""`)), refused: []string{k0 + `expiry_date: unparsable timestamp` + wantRFC}},
		{name: "expiry bad month", in: fileJSON(entryJSON("expiry_date", `"2027-13-01T00:00:00Z"`)),
			refused: []string{k0 + `expiry_date: unparsable timestamp "2027-13-01T00:00:00Z"` + wantRFC}},
		{name: "expiry a date alone", in: fileJSON(entryJSON("expiry_date", `"2027-01-01"`)),
			refused: []string{k0 + `expiry_date: unparsable timestamp "2027-01-01"` + wantRFC}},
		{name: "expiry in words", in: fileJSON(entryJSON("expiry_date", `"next year"`)), refused: []string{k0 + `expiry_date: unparsable timestamp` + wantRFC}},
		{name: "expiry epoch milliseconds", in: fileJSON(entryJSON("expiry_date", `1798761600000`)), refused: []string{k0 + `expiry_date: want a string, got a number`}},
		{name: "expiry far future", in: fileJSON(entryJSON("expiry_date", `"9999-12-31T23:59:59.999Z"`)), keys: 1},
		{name: "created before 1970", in: fileJSON(entryJSON("created_at", `"1969-12-31T23:59:59Z"`)), refused: []string{k0 + `created_at: before 1970-01-01T00:00:00Z`}},
		{name: "created missing", in: fileJSON(entryJSON("created_at", del)), keys: 1, notes: []string{k0 + `created_at: missing: imported without a creation time`}},
		{name: "created no zone", in: fileJSON(entryJSON("created_at", `"2026-01-17T18:56:50.677"`)),
			refused: []string{k0 + `created_at: unparsable timestamp "2026-01-17T18:56:50.677"` + wantRFC}},
		{name: "last_used missing", in: fileJSON(entryJSON("last_used", del)), keys: 1},
		{name: "last_used null", in: fileJSON(entryJSON("last_used", `null`)), keys: 1},
		{name: "last_used with a space", in: fileJSON(entryJSON("last_used", `"2026-01-18 09:12:03Z"`)),
			refused: []string{k0 + `last_used: unparsable timestamp "2026-01-18 09:12:03Z"` + wantRFC}},

		// usage_windows
		{name: "windows missing", in: fileJSON(entryJSON("usage_windows", del)), keys: 1, notes: []string{k0 + `usage_windows: missing: no usage to carry over`}},
		{name: "windows null", in: fileJSON(entryJSON("usage_windows", `null`)), keys: 1, notes: []string{k0 + `usage_windows: null: no usage to carry over`}},
		{name: "windows empty", in: fileJSON(entryJSON("usage_windows", `[]`)), keys: 1},
		{name: "windows an object", in: fileJSON(entryJSON("usage_windows", `{"window_start":"2026-01-18T08:00:00Z","tokens_used":1}`)),
			refused: []string{k0 + `usage_windows: want an array of windows, got an object`}},
		{name: "window not an object", in: fileJSON(entryJSON("usage_windows", `[902, null]`)),
			refused: []string{k0 + `usage_windows[0]: want an object, got a number`, k0 + `usage_windows[1]: want an object, got null`}},
		{name: "window empty object", in: fileJSON(entryJSON("usage_windows", `[{}]`)),
			refused: []string{k0 + `usage_windows[0].window_start: missing`, k0 + `usage_windows[0].tokens_used: missing`}},
		{name: "window fields null", in: fileJSON(entryJSON("usage_windows", `[{"window_start":null,"tokens_used":null}]`)),
			refused: []string{k0 + `usage_windows[0].window_start: null`, k0 + `usage_windows[0].tokens_used: null`}},
		{name: "tokens negative", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":5},{"window_start":"2026-01-18T09:00:00Z","tokens_used":-5}]`)),
			refused: []string{k0 + `usage_windows[1].tokens_used: negative: got -5, want a non-negative integer`}},
		{name: "tokens fractional", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":902.25}]`)),
			refused: []string{k0 + `usage_windows[0].tokens_used: fractional: got 902.25, want a non-negative integer`}},
		{name: "tokens nearly integer", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":20001.000000000001}]`)),
			refused: []string{k0 + `usage_windows[0].tokens_used: fractional: got 20001.000000000001, want a non-negative integer`}},
		{name: "tokens a string", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":"902"}]`)),
			refused: []string{k0 + `usage_windows[0].tokens_used: want a non-negative integer, got a string`}},
		{name: "tokens huge", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":1e19}]`)),
			refused: []string{k0 + `usage_windows[0].tokens_used: out of range: got 1e19, want a non-negative integer`}},
		{name: "tokens add up past int64", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":9223372036854775807},{"window_start":"2026-01-18T09:00:00Z","tokens_used":1}]`)),
			refused: []string{k0 + `usage_windows: the tokens_used add up to more than 2^63-1`}},
		{name: "tokens zero", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":0}]`)), keys: 1},
		{name: "window start unparsable", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00.000+0100","tokens_used":1}]`)),
			refused: []string{k0 + `usage_windows[0].window_start: unparsable timestamp "2026-01-18T08:00:00.000+0100"` + wantRFC}},
		{name: "window start epoch milliseconds", in: fileJSON(entryJSON("usage_windows", `[{"window_start":1768723200000,"tokens_used":1}]`)),
			refused: []string{k0 + `usage_windows[0].window_start: want a string, got a number`}},
		{name: "window start past Unix nanoseconds", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2300-01-01T00:00:00Z","tokens_used":1}]`)),
			refused: []string{k0 + `usage_windows[0].window_start: after 2262-04-11T23:47:16Z, the last instant a window can start`}},
		{name: "window field twice", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":1,"tokens_used":2}]`)),
			refused: []string{k0 + `usage_windows[0].tokens_used: appears twice in one object`}},
		{name: "window unknown fields", in: fileJSON(entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":1,"model":"x"},{"model":"y","window_start":"2026-01-18T09:00:00Z","tokens_used":1,"cost":0.1}]`)), keys: 1,
			notes: []string{k0 + `usage_windows[*].cost: unknown field in 1 window, ignored`, k0 + `usage_windows[*].model: unknown field in 2 windows, ignored`}},

		// rolling_window_cache
		{name: "cache ignored", in: fileJSON(entryJSON("rolling_window_cache", `{"buckets":[{"timestamp":1768723200000,"tokens":1804}],"runningTotal":1804}`)), keys: 1,
			notes: []string{k0 + `rolling_window_cache: ignored: usage_windows is the source of truth`}},
		{name: "cache malformed, still ignored", in: fileJSON(entryJSON("rolling_window_cache", `"corrupt"`)), keys: 1,
			notes: []string{k0 + `rolling_window_cache: ignored: usage_windows is the source of truth`}},
		{name: "cache null", in: fileJSON(entryJSON("rolling_window_cache", `null`)), keys: 1},

		// duplicates
		{name: "exact duplicate", in: fileJSON(entryJSON(), entryJSON()), keys: 1,
			skipped: []string{k1 + `exact duplicate of keys[0], left out`}},
		{name: "exact duplicate, spelled differently", in: fileJSON(entryJSON(), entryJSON(
			"expiry_date", `"2027-01-01T01:00:00+01:00"`, "token_limit_per_5h", `1e5`, "owner", `"x"`, "rolling_window_cache", `{}`,
			"usage_windows", `[{"tokens_used":902,"window_start":"2026-01-18T08:00:00Z"}]`)), keys: 1,
			skipped: []string{k1 + `exact duplicate of keys[0], left out`},
			notes:   []string{k1 + `owner: unknown field, ignored`, k1 + `rolling_window_cache: ignored: usage_windows is the source of truth`}},
		{name: "conflicting duplicate", in: fileJSON(entryJSON(), entryJSON("token_limit_per_5h", `200000`)),
			refused: []string{k1 + `key: same secret as keys[0], but token_limit_per_5h differs`}},
		{name: "conflicting duplicate windows", in: fileJSON(entryJSON(), entryJSON("usage_windows", `[{"window_start":"2026-01-18T08:00:00Z","tokens_used":903}]`)),
			refused: []string{k1 + `key: same secret as keys[0], but usage_windows[0] differs`}},
		{name: "conflicting duplicate, other name", in: fileJSON(entryJSON(), entryJSON("name", `"team-b"`)),
			refused: []string{`keys[1] "team-b": key: same secret as keys[0], but name differs`}},
		{name: "duplicate with problems of its own", in: fileJSON(entryJSON(), entryJSON("token_limit_per_5h", `0`)),
			refused: []string{k1 + `token_limit_per_5h: zero: got 0, want a positive integer`,
				k1 + `key: same secret as keys[0]; not compared, as this entry has other problems`}},
		{name: "one name, two secrets", in: fileJSON(entryJSON(), entryJSON("key", other)), keys: 2,
			notes: []string{k1 + `name: also the name of keys[0]`}},
		{name: "every problem listed", in: fileJSON(entryJSON("token_limit_per_5h", `0`), entryJSON("key", other, "usage_windows", `[{"window_start":"x","tokens_used":-1}]`)),
			refused: []string{k0 + `token_limit_per_5h: zero: got 0, want a positive integer`,
				k1 + `usage_windows[0].window_start: unparsable timestamp` + wantRFC,
				k1 + `usage_windows[0].tokens_used: negative: got -1, want a non-negative integer`},
			notes: []string{k1 + `name: also the name of keys[0]`}},
	}
}

// TestParseLegacyCases: what is refused, skipped and noted, exactly.
func TestParseLegacyCases(t *testing.T) {
	for _, tt := range legacyCases() {
		t.Run(tt.name, func(t *testing.T) {
			keys, rep, err := parseLegacy(strings.NewReader(tt.in))
			checkInvariants(t, keys, rep, err)
			assert.Equal(t, tt.refused, issueStrings(rep.Refusals), "refused")
			assert.Equal(t, tt.skipped, issueStrings(rep.Skips), "skipped")
			assert.Equal(t, tt.notes, issueStrings(rep.Notes), "notes")
			if tt.refused != nil {
				require.ErrorIs(t, err, ErrRefused)
				assert.Contains(t, err.Error(), tt.refused[0])
			} else {
				require.NoError(t, err)
				assert.Equal(t, tt.keys, rep.Keys)
			}
			assert.NotContains(t, reportTexts(t, rep, err), secret)
		})
	}
}
