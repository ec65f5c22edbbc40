package admin

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/pricing"
)

// The admin API's spend ledger (package ledger): GET /admin/spend, the
// totals of the ledger's rollups grouped by key, team, model, day or
// hour, and GET /admin/requests, its entries newest first, a page at a
// time. Both answer JSON, or CSV to a request whose Accept asks for
// text/csv first. The command line prints the same shapes, built by the
// same functions (ParseSpendQuery, NewSpend, Spend.WriteCSV and
// their requests' counterparts), from a database it opens itself.

// Counters are the counters of a group of requests (ledger.Totals):
// what the requests served used, by token type (disjoint: input excludes
// the cached prompt, output the reasoning), what they cost, and how many
// requests were refused, in all and by reason (a keystore.Denial's:
// "window", "budget", "rate", "concurrency", "model", ...; left out when
// none were).
type Counters struct {
	Requests         int64            `json:"requests"`
	InputTokens      int64            `json:"input_tokens"`
	OutputTokens     int64            `json:"output_tokens"`
	CacheReadTokens  int64            `json:"cache_read_tokens"`
	CacheWriteTokens int64            `json:"cache_write_tokens"`
	ReasoningTokens  int64            `json:"reasoning_tokens"`
	CostUSD          pricing.USD      `json:"cost_usd"`
	Refused          int64            `json:"refused"`
	RefusedBy        map[string]int64 `json:"refused_by,omitempty"`
}

// SpendRow is one group of an Spend: the values of the
// dimensions it is grouped by, and its counters. A dimension not grouped
// by is left out (nil); one grouped by is there even when "" (the keys in
// no team), so that such a group shows as one.
type SpendRow struct {
	Key   *string `json:"key,omitempty"`
	Team  *string `json:"team,omitempty"`
	Model *string `json:"model,omitempty"`
	// EndUser: the end user the requests named ("" for those that named
	// none, the key's own traffic).
	EndUser *string `json:"end_user,omitempty"`
	Day     *string `json:"day,omitempty"`  // the UTC date: "2026-11-26"
	Hour    *string `json:"hour,omitempty"` // the hour's start, RFC 3339 in UTC: "2026-11-26T14:00:00Z"
	// Other: the row adds up the groups past the query's limit (ranked by
	// cost over the range); its grouped dimensions but time read "(other)".
	Other bool `json:"other,omitempty"`
	Counters
}

// Dimension returns the value of r's dimension name (ledger.ByKey, ...),
// and whether r is grouped by it.
func (r SpendRow) Dimension(name string) (string, bool) {
	var v *string
	switch name {
	case ledger.ByKey:
		v = r.Key
	case ledger.ByTeam:
		v = r.Team
	case ledger.ByModel:
		v = r.Model
	case ledger.ByEndUser:
		v = r.EndUser
	case ledger.ByDay:
		v = r.Day
	case ledger.ByHour:
		v = r.Hour
	}
	if v == nil {
		return "", false
	}
	return *v, true
}

// Spend is the answer to GET /admin/spend: the range as the ledger
// rounded it out ([From, To), whole UTC days, or hours when grouped by
// hour), the dimensions grouped by as asked ([] for none: one row, the
// total, when anything happened), the rows in the ledger's order (time,
// then key, team and model), and their total.
type Spend struct {
	From    time.Time  `json:"from"`
	To      time.Time  `json:"to"`
	GroupBy []string   `json:"group_by"`
	Rows    []SpendRow `json:"rows"`
	Total   Counters   `json:"total"`
}

// Requests is the answer to GET /admin/requests: entries of the
// ledger, newest first, each in ledger.Entry's JSON shape, and the cursor
// of the next page, left out when there is none.
type Requests struct {
	Requests   []ledger.Entry `json:"requests"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// NextCursorHeader is the response field of GET /admin/requests that
// holds the next page's cursor, for CSV answers, which have no room for
// it (JSON ones have it too).
const NextCursorHeader = "X-Next-Cursor"

// NewSpend is s as the admin API answers it.
func NewSpend(s ledger.Spend) Spend {
	a := Spend{From: s.From.UTC(), To: s.To.UTC(), GroupBy: append([]string{}, s.GroupBy...),
		Rows: make([]SpendRow, len(s.Rows)), Total: newCounters(s.Total)}
	for i, r := range s.Rows {
		row := SpendRow{Counters: newCounters(r.Totals), Other: r.Other}
		for _, by := range s.GroupBy {
			switch by {
			case ledger.ByKey:
				row.Key = &r.Key
			case ledger.ByTeam:
				row.Team = &r.Team
			case ledger.ByModel:
				row.Model = &r.Model
			case ledger.ByEndUser:
				row.EndUser = &r.EndUser
			case ledger.ByDay:
				day := r.Day.UTC().Format(time.DateOnly)
				row.Day = &day
			case ledger.ByHour:
				hour := r.Day.UTC().Format(time.RFC3339)
				row.Hour = &hour
			}
		}
		a.Rows[i] = row
	}
	return a
}

func newCounters(t ledger.Totals) Counters {
	c := Counters{
		Requests: t.Requests, InputTokens: t.Tokens.Input, OutputTokens: t.Tokens.Output,
		CacheReadTokens: t.Tokens.CacheRead, CacheWriteTokens: t.Tokens.CacheWrite, ReasoningTokens: t.Tokens.Reasoning,
		CostUSD: t.Cost, Refused: t.Refused,
	}
	if len(t.Reasons) > 0 {
		c.RefusedBy = maps.Clone(t.Reasons)
	}
	return c
}

// NewRequests is p as the admin API answers it.
func NewRequests(p ledger.Page) Requests {
	return Requests{Requests: append([]ledger.Entry{}, p.Entries...), NextCursor: p.Next}
}

// counterColumns are the CSV columns of Counters, in the order of
// their JSON fields; refused_by has no column.
var counterColumns = []string{"requests", "input_tokens", "output_tokens", "cache_read_tokens",
	"cache_write_tokens", "reasoning_tokens", "cost_usd", "refused"}

func (c Counters) record() []string {
	n := strconv.FormatInt
	return []string{n(c.Requests, 10), n(c.InputTokens, 10), n(c.OutputTokens, 10), n(c.CacheReadTokens, 10),
		n(c.CacheWriteTokens, 10), n(c.ReasoningTokens, 10), c.CostUSD.String(), n(c.Refused, 10)}
}

// WriteCSV writes s as GET /admin/spend answers it to Accept: text/csv: a
// header of the dimensions grouped by, in s.GroupBy's order, and the
// counters (without refused_by); then a record per row, and no total. Money
// is an exact decimal number of USD. A text cell that a spreadsheet would
// read as a formula is prefixed with ' (see csvText).
func (s Spend) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(append(slices.Clone(s.GroupBy), counterColumns...))
	for _, r := range s.Rows {
		rec := make([]string, 0, len(s.GroupBy)+len(counterColumns))
		for _, by := range s.GroupBy {
			v, _ := r.Dimension(by)
			rec = append(rec, csvText(v))
		}
		cw.Write(append(rec, r.record()...))
	}
	cw.Flush()
	return cw.Error()
}

// RequestColumns are the CSV columns of GET /admin/requests: the fields
// of ledger.Entry's JSON, in its order. end_user is last: the columns
// before it keep the places they had before entries named end users, for
// the scripts that read them by place.
var RequestColumns = []string{"time", "request_id", "key", "team", "model", "route", "upstream", "status", "latency_ms",
	"input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens", "cost_usd", "estimated", "end_user"}

// WriteCSV writes p as GET /admin/requests answers it to Accept: text/csv:
// a header of RequestColumns, then a record per entry, each value as in
// its JSON ("" for no team), text cells guarded as Spend.WriteCSV's.
// The next page's cursor is not in it (NextCursorHeader).
func (p Requests) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write(RequestColumns)
	n := strconv.FormatInt
	for _, e := range p.Requests {
		t := e.Tokens
		cw.Write([]string{
			e.Time.UTC().Format(ledger.TimeFormat), csvText(e.RequestID), csvText(e.Key), csvText(e.Team),
			csvText(e.Model), csvText(e.Route), csvText(e.Upstream), n(int64(e.Status), 10), n(e.Latency.Milliseconds(), 10),
			n(t.Input, 10), n(t.Output, 10), n(t.CacheRead, 10), n(t.CacheWrite, 10), n(t.Reasoning, 10),
			e.Cost.String(), strconv.FormatBool(e.Estimated), csvText(e.EndUser),
		})
	}
	cw.Flush()
	return cw.Error()
}

// csvText is s as a CSV cell that a spreadsheet shows as text. Key
// holders choose the model names they send, and a cell starting with =,
// +, -, @, a tab or a carriage return is read as a formula by Excel,
// LibreOffice and Sheets ("=cmd|' /c calc'!A1"): such a cell gets a
// leading ', which they hide and which makes the rest text (OWASP's
// advice against CSV injection). Numbers are never guarded: the ledger's
// are never negative.
func csvText(s string) string {
	if s != "" && strings.IndexByte("=+-@\t\r", s[0]) >= 0 {
		return "'" + s
	}
	return s
}

// ParamError is a query parameter of the admin API that is wrong, or
// unknown: Param names it (as the query does: "group_by"), or is "" for
// one the API does not have, which Msg quotes. It matches
// backend.ErrInvalid.
type ParamError struct {
	Param string
	Msg   string
}

func (e *ParamError) Error() string {
	if e.Param == "" {
		return e.Msg
	}
	return e.Param + ": " + e.Msg
}

func (e *ParamError) Unwrap() error { return backend.ErrInvalid }

// The query parameters of GET /admin/spend and /admin/requests. Any other
// is refused, so that a misspelt filter (?modle=gpt-4o) is an error
// rather than an answer about every model.
var (
	spendParams   = []string{"from", "to", "group_by", "key", "team", "model", "end_user", "limit"}
	requestParams = []string{"key", "team", "model", "end_user", "status", "from", "to", "limit", "cursor"}
)

// ParseSpendQuery reads the query of GET /admin/spend: from and to (see
// parseWhen; left out, the ledger's default, the last 30 days), group_by
// (repeatable, each value a comma-separated list of key, team, model,
// end_user, day or hour) and the filters key, team, model and end_user. A
// parameter with an empty value is as if left out. Its errors are
// ParamErrors; end_user with model (grouped or filtered) is the ledger's
// to refuse (a ledger.QueryError).
func ParseSpendQuery(v url.Values) (ledger.SpendQuery, error) {
	var q ledger.SpendQuery
	if err := checkParams(v, spendParams, "group_by"); err != nil {
		return q, err
	}
	var err error
	if q.From, q.To, err = parseRange(v); err != nil {
		return q, err
	}
	if q.GroupBy, err = parseGroupBy(v["group_by"]); err != nil {
		return q, err
	}
	if q.Limit, err = intParam(v, "limit", 1, ledger.MaxLimit, "a number of groups"); err != nil {
		return q, err
	}
	q.Key, q.Team, q.Model, q.EndUser = v.Get("key"), v.Get("team"), v.Get("model"), v.Get("end_user")
	return q, nil
}

// ParseRequestQuery reads the query of GET /admin/requests: the filters
// key, team, model, end_user and status (an HTTP status), from and to as for
// ParseSpendQuery (left out: the ledger's whole retention), limit (1 to
// ledger.MaxLimit; left out, 100) and cursor (a page's next_cursor). A
// parameter with an empty value is as if left out. Its errors are
// ParamErrors; a cursor that is not one the ledger gave is the ledger's
// to refuse (ledger.ErrInvalid).
func ParseRequestQuery(v url.Values) (ledger.RequestQuery, error) {
	var q ledger.RequestQuery
	if err := checkParams(v, requestParams, ""); err != nil {
		return q, err
	}
	var err error
	if q.From, q.To, err = parseRange(v); err != nil {
		return q, err
	}
	if q.Status, err = intParam(v, "status", 100, 999, "an HTTP status"); err != nil {
		return q, err
	}
	if q.Limit, err = intParam(v, "limit", 1, ledger.MaxLimit, "a number of requests"); err != nil {
		return q, err
	}
	q.Key, q.Team, q.Model, q.Cursor = v.Get("key"), v.Get("team"), v.Get("model"), v.Get("cursor")
	q.EndUser = v.Get("end_user")
	return q, nil
}

// checkParams refuses a parameter of v not among allowed, and one given
// more than once but repeatable.
func checkParams(v url.Values, allowed []string, repeatable string) error {
	for _, name := range slices.Sorted(maps.Keys(v)) { // the same error for the same query
		switch {
		case !slices.Contains(allowed, name):
			return &ParamError{Msg: fmt.Sprintf("unknown parameter %.40q: the parameters are %s", name, strings.Join(allowed, ", "))}
		case len(v[name]) > 1 && name != repeatable:
			return &ParamError{Param: name, Msg: "given more than once: give it once"}
		}
	}
	return nil
}

// parseRange reads the from and to of v, the zero Time for one left out,
// and checks that from is before to when both are given.
func parseRange(v url.Values) (from, to time.Time, err error) {
	if s := v.Get("from"); s != "" {
		if from, err = parseWhen("from", s); err != nil {
			return from, to, err
		}
	}
	if s := v.Get("to"); s != "" {
		if to, err = parseWhen("to", s); err != nil {
			return from, to, err
		}
	}
	if !from.IsZero() && !to.IsZero() && !from.Before(to) {
		return from, to, &ParamError{Param: "from", Msg: fmt.Sprintf("%s is not before to %s: the range is [from, to)",
			from.Format(time.RFC3339Nano), to.Format(time.RFC3339Nano))}
	}
	return from, to, nil
}

// parseWhen reads the instant of parameter param: RFC 3339
// (2026-11-26T14:00:00Z, 2026-11-26T15:00:00+01:00), or a date
// (2026-11-26), its midnight in UTC. A "+" of an offset that was not
// escaped in the query reads as a space, which is read back as "+".
func parseWhen(param, s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, strings.Replace(s, " ", "+", 1)); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, &ParamError{Param: param, Msg: fmt.Sprintf("%.40q: want an RFC 3339 instant (2026-11-26T14:00:00Z) or a date (2026-11-26: midnight UTC)", s)}
}

// parseGroupBy reads the values of group_by: each a comma-separated list
// of dimensions, each given once, day and hour not both.
func parseGroupBy(values []string) ([]string, error) {
	by := []string{}
	for _, v := range values {
		if v == "" {
			continue
		}
		for part := range strings.SplitSeq(v, ",") {
			part = strings.TrimSpace(part)
			switch {
			case !slices.Contains([]string{ledger.ByKey, ledger.ByTeam, ledger.ByModel, ledger.ByEndUser, ledger.ByDay, ledger.ByHour}, part):
				return nil, &ParamError{Param: "group_by", Msg: fmt.Sprintf("%.40q: want key, team, model, end_user, day or hour", part)}
			case slices.Contains(by, part):
				return nil, &ParamError{Param: "group_by", Msg: fmt.Sprintf("%q given twice", part)}
			}
			by = append(by, part)
		}
	}
	if slices.Contains(by, ledger.ByDay) && slices.Contains(by, ledger.ByHour) {
		return nil, &ParamError{Param: "group_by", Msg: "day and hour: choose one"}
	}
	return by, nil
}

// intParam reads parameter name of v, a whole number from lo to hi (what
// it is, for messages); 0 when left out.
func intParam(v url.Values, name string, lo, hi int, what string) (int, error) {
	s := v.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, &ParamError{Param: name, Msg: fmt.Sprintf("%.40q: want %s, %d to %d", s, what, lo, hi)}
	}
	return n, nil
}

// spend answers GET /admin/spend: ParseSpendQuery, ledger.Spend, and
// NewSpend as JSON or CSV.
func (api *API) spend(w http.ResponseWriter, r *http.Request) {
	v, ok := api.ledgerQuery(w, r)
	if !ok {
		return
	}
	q, err := ParseSpendQuery(v)
	if err != nil {
		api.spendFailed(w, r, err)
		return
	}
	noteFilters(w, q.Key, q.Team)
	s, err := api.ledger.Spend(r.Context(), q)
	if err != nil {
		api.spendFailed(w, r, err)
		return
	}
	a := NewSpend(s)
	writeTable(w, r, a, a.WriteCSV)
}

// requests answers GET /admin/requests: ParseRequestQuery,
// ledger.Requests, and NewRequests as JSON or CSV, with the next
// page's cursor in NextCursorHeader too.
func (api *API) requests(w http.ResponseWriter, r *http.Request) {
	v, ok := api.ledgerQuery(w, r)
	if !ok {
		return
	}
	q, err := ParseRequestQuery(v)
	if err != nil {
		api.spendFailed(w, r, err)
		return
	}
	noteFilters(w, q.Key, q.Team)
	p, err := api.ledger.Requests(r.Context(), q)
	if err != nil {
		api.spendFailed(w, r, err)
		return
	}
	a := NewRequests(p)
	if a.NextCursor != "" {
		w.Header().Set(NextCursorHeader, a.NextCursor)
	}
	writeTable(w, r, a, a.WriteCSV)
}

// ledgerQuery returns the query of r, a request to the ledger's routes,
// or answers 404 when the gateway keeps no ledger and 400 when the query
// does not parse, and returns false.
func (api *API) ledgerQuery(w http.ResponseWriter, r *http.Request) (url.Values, bool) {
	if !api.hasLedger(w, "it has no spend or requests to show") {
		return nil, false
	}
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_parameter", fmt.Sprintf("the query does not parse: %v", err))
		return nil, false
	}
	return v, true
}

// noteFilters notes the key and team a ledger query is about, if any, for
// its log line.
func noteFilters(w http.ResponseWriter, key, team string) {
	if key != "" {
		noteKey(w, key)
	}
	if team != "" {
		noteTeam(w, team)
	}
}

// spendFailed answers a ledger query that failed: 400 naming the
// parameter that is wrong (a ParamError, or the ledger's QueryError: a
// range too long, a cursor it did not give); otherwise the failure is
// logged and the answer is 500 (a corrupt record) or 503.
func (api *API) spendFailed(w http.ResponseWriter, r *http.Request, err error) {
	var pe *ParamError
	var qe *ledger.QueryError
	switch {
	case errors.As(err, &pe):
		apierror.WriteParam(w, http.StatusBadRequest, apierror.Invalid, "invalid_parameter", pe.Param, pe.Error())
		return
	case errors.As(err, &qe):
		apierror.WriteParam(w, http.StatusBadRequest, apierror.Invalid, "invalid_parameter", qe.Param, qe.Param+": "+qe.Msg)
		return
	}
	api.readFailed(w, r, err, "spend ledger", "ledger_corrupt")
}

// readFailed answers a read of what the gateway keeps ("spend ledger")
// that failed for another reason than the query: the failure is logged
// (unless the caller has gone) and the answer is 500 corruptCode for a
// corrupt record, else 503.
func (api *API) readFailed(w http.ResponseWriter, r *http.Request, err error, what, corruptCode string) {
	if r.Context().Err() == nil {
		api.log.LogAttrs(r.Context(), slog.LevelError, "gateway admin: the "+what+" failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	}
	if errors.Is(err, backend.ErrCorrupt) {
		writeError(w, http.StatusInternalServerError, apierror.API, corruptCode, "a record of the "+what+" cannot be read: see the gateway's log")
		return
	}
	writeError(w, http.StatusServiceUnavailable, apierror.API, "store_unavailable", "the gateway's "+what+" could not be read; retry later")
}

// writeTable answers 200 with v as JSON or, when r asks for CSV (see
// wantsCSV), with what writeCSV writes, as text/csv.
func writeTable(w http.ResponseWriter, r *http.Request, v any, writeCSV func(io.Writer) error) {
	w.Header().Add("Vary", "Accept")
	if !wantsCSV(r) {
		writeJSON(w, http.StatusOK, v)
		return
	}
	var b bytes.Buffer
	_ = writeCSV(&b) // a bytes.Buffer takes every write
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}

// wantsCSV reports whether the Accept of r asks for CSV: it lists
// text/csv (with a q other than 0) before application/json, if that is
// listed at all. Anything else, no Accept or */* included, gets JSON.
func wantsCSV(r *http.Request) bool {
	for _, accept := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(accept, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || params["q"] != "" && strings.Trim(params["q"], "0.") == "" {
				continue // unreadable, or q=0: not acceptable
			}
			switch mt {
			case "text/csv":
				return true
			case "application/json":
				return false
			}
		}
	}
	return false
}
