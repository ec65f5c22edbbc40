package legacy

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// entry is the state of the entry of "keys" being read.
type entry struct {
	at  loc // the entry itself
	key Key

	secret, name, model, limit, expiry, created, lifetime, windows fieldState

	cache      bool           // a rolling_window_cache that is not null
	windowSum  int64          // tokens_used of the windows read
	overflow   bool           // windowSum passed math.MaxInt64
	winUnknown map[string]int // unknown window field -> windows that have it
	unknown    []unknownField // notes on unknown fields
	marks      [3]int         // lengths of Refusals, Skips, Notes when the entry began
}

// unknownField is a note on an unknown field: its position in Notes and the
// field's name in full.
type unknownField struct {
	note int
	name string
}

// entry reads the entry whose first token is tok.
func (p *parser) entry(tok json.Token) error {
	e := &entry{at: loc{entry: p.cur, window: -1}}
	if tok != json.Delim('{') {
		_, err := p.wrongType(e.at, tok, "an object")
		return err
	}
	e.marks = [3]int{len(p.rep.Refusals), len(p.rep.Skips), len(p.rep.Notes)}
	if err := p.members(e.at, func(at loc) error { return p.keyMember(e, at) }); err != nil {
		p.label(e)
		return err
	}
	p.check(e)
	return nil
}

// keyMember reads the member at.field of an entry.
func (p *parser) keyMember(e *entry, at loc) (err error) {
	k := &e.key
	switch at.field {
	case "key":
		k.Secret, e.secret, err = p.readString(at)
	case "name":
		k.Name, e.name, err = p.readString(at)
	case "model":
		k.Model, e.model, err = p.readString(at)
	case "token_limit_per_5h":
		k.TokenLimit, e.limit, err = p.readInt(at, true)
	case "total_lifetime_tokens":
		k.LifetimeTokens, e.lifetime, err = p.readInt(at, false)
	case "expiry_date":
		k.ExpiresAt, e.expiry, err = p.readTime(at)
	case "created_at":
		k.CreatedAt, e.created, err = p.readTime(at)
	case "last_used":
		k.LastUsed, _, err = p.readTime(at)
	case "usage_windows":
		err = p.windows(e, at)
	case "rolling_window_cache": // never read: it may be stale or double-counted
		tok, err := p.next()
		if err != nil {
			return err
		}
		e.cache = tok != nil
		return p.skipRest(tok)
	default:
		e.unknown = append(e.unknown, unknownField{note: len(p.rep.Notes), name: at.field})
		p.note(at, "unknown field, ignored")
		return p.skipValue()
	}
	return err
}

// windows reads usage_windows.
func (p *parser) windows(e *entry, at loc) error {
	tok, err := p.next()
	switch {
	case err != nil:
		return err
	case tok == nil:
		e.windows = null
		return nil
	case tok != json.Delim('['):
		e.windows, err = p.wrongType(at, tok, "an array of windows")
		return err
	}
	e.windows = valid
	w := &windowReader{p: p, e: e}
	member := w.member
	for i := 0; ; i++ {
		tok, err := p.next()
		if err != nil {
			return err
		}
		if tok == json.Delim(']') {
			break
		}
		wat := loc{entry: at.entry, window: i}
		if tok != json.Delim('{') {
			if _, err := p.wrongType(wat, tok, "an object"); err != nil {
				return err
			}
			continue
		}
		w.win, w.start, w.tokens = Window{}, absent, absent
		if err := p.members(wat, member); err != nil {
			return err
		}
		w.finish(wat)
	}
	if e.overflow {
		p.refuse(at, "the tokens_used add up to more than 2^63-1")
	}
	names := make([]string, 0, len(e.winUnknown))
	for name := range e.winUnknown {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		e.unknown = append(e.unknown, unknownField{note: len(p.rep.Notes), name: name})
		p.note(loc{entry: at.entry, window: -1, field: "usage_windows[*]." + clip(name)},
			"unknown field in "+plural(e.winUnknown[name], "window")+", ignored")
	}
	return nil
}

// windowReader reads the windows of one entry, one at a time.
type windowReader struct {
	p             *parser
	e             *entry
	win           Window
	start, tokens fieldState
}

func (w *windowReader) member(at loc) (err error) {
	switch at.field {
	case "window_start":
		w.win.Start, w.start, err = w.p.readTime(at)
	case "tokens_used":
		w.win.Tokens, w.tokens, err = w.p.readInt(at, false)
	default:
		if w.e.winUnknown == nil {
			w.e.winUnknown = map[string]int{}
		}
		w.e.winUnknown[at.field]++
		return w.p.skipValue()
	}
	return err
}

// finish checks the window just read, and keeps it if it is valid.
func (w *windowReader) finish(at loc) {
	for _, f := range [...]struct {
		name string
		st   fieldState
	}{{"window_start", w.start}, {"tokens_used", w.tokens}} {
		if f.st.missing() {
			at.field = f.name
			w.p.refuse(at, f.st.String())
		}
	}
	if w.start != valid || w.tokens != valid {
		return
	}
	e := w.e
	e.key.Windows = append(e.key.Windows, w.win)
	if e.windowSum > math.MaxInt64-w.win.Tokens {
		e.overflow = true
	} else {
		e.windowSum += w.win.Tokens
	}
}

func (p *parser) readString(at loc) (string, fieldState, error) {
	tok, err := p.next()
	if err != nil {
		return "", absent, err
	}
	switch s := tok.(type) {
	case string:
		return s, valid, nil
	case nil:
		return "", null, nil
	}
	st, err := p.wrongType(at, tok, "a string")
	return "", st, err
}

// readInt reads an integer: > 0 if positive, else >= 0.
func (p *parser) readInt(at loc, positive bool) (int64, fieldState, error) {
	want := "a non-negative integer"
	if positive {
		want = "a positive integer"
	}
	tok, err := p.next()
	if err != nil {
		return 0, absent, err
	}
	lit, ok := tok.(json.Number)
	if !ok {
		if tok == nil {
			return 0, null, nil
		}
		st, err := p.wrongType(at, tok, want)
		return 0, st, err
	}
	v, why := parseInteger(string(lit))
	if why == "" && positive && v == 0 {
		why = "zero"
	}
	if why == "" {
		return v, valid, nil
	}
	got := echo(string(lit))
	if got == "" {
		got = "a number of " + strconv.Itoa(len(lit)) + " characters"
	}
	p.refuse(at, why+": got "+got+", want "+want)
	return 0, rejected, nil
}

// readTime reads a timestamp (parseTimestamp) from 1970 on; a window start
// must also lie within the range of Unix nanoseconds.
func (p *parser) readTime(at loc) (time.Time, fieldState, error) {
	s, st, err := p.readString(at)
	if st != valid {
		return time.Time{}, st, err
	}
	t, ok := parseTimestamp(s)
	switch {
	case !ok:
		got := ""
		if e := echo(s); e != "" {
			got = " " + strconv.Quote(e)
		}
		p.refuse(at, "unparsable timestamp"+got+": want RFC 3339 such as 2026-01-18T08:00:00Z or 2026-01-18T09:00:00.000+01:00")
	case t.Before(minTime):
		p.refuse(at, "before 1970-01-01T00:00:00Z")
	case at.window >= 0 && t.After(maxWindowStart):
		p.refuse(at, "after "+maxWindowStart.Format(time.RFC3339)+", the last instant a window can start")
	default:
		return t, valid, nil
	}
	return time.Time{}, rejected, nil
}

// check judges an entry read in full: required and missing fields,
// duplicates; it keeps the key if nothing refused or skipped it.
func (p *parser) check(e *entry) {
	k := &e.key
	at := func(field string) loc { return loc{entry: e.at.entry, window: -1, field: field} }
	hasSecret := e.secret == valid && strings.TrimSpace(k.Secret) != ""
	switch {
	case e.secret.missing():
		p.refuse(at("key"), e.secret.String()+": every key needs its secret")
	case e.secret == valid && !hasSecret:
		p.refuse(at("key"), "empty or blank")
	case hasSecret && strings.ContainsRune(k.Secret, utf8.RuneError):
		p.refuse(at("key"), "holds invalid UTF-8 or U+FFFD: the secret could not be kept exactly")
	}
	if e.limit.missing() {
		p.refuse(at("token_limit_per_5h"), e.limit.String()+": want a positive integer")
	}
	for _, f := range [...]struct {
		name, value string
		st          fieldState
	}{{"name", k.Name, e.name}, {"model", k.Model, e.model}} {
		switch {
		case hasSecret && holdsSecret(f.value, k.Secret):
			p.refuse(at(f.name), "holds the secret, which would be stored in plain text")
		case f.st.missing():
			p.note(at(f.name), f.st.String()+": imported without a "+f.name)
		case f.st == valid && f.value == "":
			p.note(at(f.name), "empty: imported without a "+f.name)
		}
	}
	if e.expiry.missing() {
		p.note(at("expiry_date"), e.expiry.String()+": the key never expires")
	}
	if e.created.missing() {
		p.note(at("created_at"), e.created.String()+": imported without a creation time")
	}
	switch {
	case e.lifetime.missing():
		p.note(at("total_lifetime_tokens"), e.lifetime.String()+": lifetime usage starts at 0")
	case e.lifetime == valid && !e.overflow && e.windowSum > k.LifetimeTokens:
		p.note(at("total_lifetime_tokens"), fmt.Sprintf(
			"%d, less than the %d tokens_used of usage_windows: kept as is", k.LifetimeTokens, e.windowSum))
	}
	if e.windows.missing() {
		p.note(at("usage_windows"), e.windows.String()+": no usage to carry over")
	}
	if e.cache {
		p.rep.IgnoredCaches++
		p.note(at("rolling_window_cache"), "ignored: usage_windows is the source of truth")
	}
	skipped := hasSecret && p.duplicate(e)
	p.label(e)
	if !skipped && !p.rep.Refused() {
		p.keys = append(p.keys, *k)
	}
}

// duplicate compares an entry with the first entry that has its secret, and
// reports whether it is an exact duplicate, to skip. The first entries of
// secrets and names are remembered here.
func (p *parser) duplicate(e *entry) bool {
	k := &e.key
	at := loc{entry: e.at.entry, window: -1, field: "key"}
	first, seen := p.first[k.Secret]
	if !seen {
		p.first[k.Secret] = firstEntry{index: e.at.entry, key: *k}
		if k.Name != "" {
			if j, ok := p.names[k.Name]; ok {
				p.note(loc{entry: e.at.entry, window: -1, field: "name"}, fmt.Sprintf("also the name of keys[%d]", j))
			} else {
				p.names[k.Name] = e.at.entry
			}
		}
		return false
	}
	if len(p.rep.Refusals) > e.marks[0] {
		p.refuse(at, fmt.Sprintf("same secret as keys[%d]; not compared, as this entry has other problems", first.index))
		return false
	}
	if d := first.key.diff(*k); d != "" {
		p.refuse(at, fmt.Sprintf("same secret as keys[%d], but %s differs", first.index, d))
		return false
	}
	p.add(&p.rep.Skips, e.at, fmt.Sprintf("exact duplicate of keys[%d], left out", first.index))
	return true
}

// holdsSecret reports whether s reveals secret: equals it, or contains it
// when it is 8 bytes or longer (a shorter one would match by chance).
func holdsSecret(s, secret string) bool {
	return s == secret || len(secret) >= 8 && strings.Contains(s, secret)
}

// label gives the entry's issues its name, and redacts any name and unknown
// field name that holds its secret.
func (p *parser) label(e *entry) {
	name := clip(e.key.Name)
	secret := ""
	if e.secret == valid && strings.TrimSpace(e.key.Secret) != "" {
		secret = e.key.Secret
	}
	if secret != "" && holdsSecret(e.key.Name, secret) {
		name = redacted
	}
	for i, list := range [...][]Issue{p.rep.Refusals, p.rep.Skips, p.rep.Notes} {
		for j := e.marks[i]; j < len(list); j++ {
			list[j].Name = name
		}
	}
	for _, u := range e.unknown {
		if secret != "" && holdsSecret(u.name, secret) {
			p.rep.Notes[u.note].Field = redacted
		}
	}
}
