package admin

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ratestore/ratestore/internal/apierror"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/strategies"
)

// policyBody is the policy fields of KeyRequest and TeamRequest as the
// API decodes them: the lists raw, so that their length is checked before
// any element is read (readList), and each window and budget apart, so
// that an error names its index.
type policyBody struct {
	Models json.RawMessage `json:"models"`
	limitsBody
	ModelLimits json.RawMessage `json:"model_limits"`
	EndUsers    json.RawMessage `json:"end_users"`
}

// limitsBody is the limits of a policy, of one of its model limits or of
// its end users, as the API decodes them.
type limitsBody struct {
	Windows           json.RawMessage `json:"windows"`
	RequestsPerMinute *int64          `json:"requests_per_minute"`
	MaxConcurrent     *int            `json:"max_concurrent"`
	Budgets           json.RawMessage `json:"budgets"`
}

// readList splits raw, the JSON array of field, into its elements,
// refusing it as soon as it has more than max: the elements are scanned
// and not decoded (each is a slice of raw), so that a list of a million
// elements costs a scan of the body, bounded by MaxBody, and no more. A
// missing field or null is nil and ok; an empty array is an empty slice.
func readList(raw json.RawMessage, field string, max int) ([]json.RawMessage, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, ""
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '[' {
		return nil, fmt.Sprintf("%s: want an array", field)
	}
	elems := []json.RawMessage{}
	for dec.PeekKind() != ']' {
		if len(elems) == max {
			return nil, fmt.Sprintf("%s: more than %d elements: at most %d", field, max, max)
		}
		start := dec.InputOffset()
		if err := dec.SkipValue(); err != nil {
			return nil, fmt.Sprintf("%s[%d]: %v", field, len(elems), err)
		}
		elems = append(elems, bytes.TrimLeft(raw[start:dec.InputOffset()], " \t\r\n,"))
	}
	return elems, ""
}

// keyBody is KeyRequest as the gateway decodes it.
type keyBody struct {
	Name  *string `json:"name"`
	Model *string `json:"model"`
	Team  *string `json:"team"`
	policyBody
	ExpiresAt json.RawMessage `json:"expires_at"`
	Disabled  *bool           `json:"disabled"`
}

// teamBody is TeamRequest as the gateway decodes it.
type teamBody struct {
	Name *string `json:"name"`
	policyBody
}

// readBody decodes the body of r, one JSON object, into v strictly
// (decodeStrict), or answers 400 or 413 and returns false.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	if status, code, msg := decodeStrict(http.MaxBytesReader(w, r.Body, MaxBody), v, ""); status != 0 {
		writeError(w, status, apierror.Invalid, code, msg)
		return false
	}
	return true
}

// readKeyFields reads the body of r, an KeyRequest, and checks what
// can be checked without the key: the types, the durations, the instant,
// and the lists' lengths. It answers 400 or 413 and
// returns false when the body is wrong.
func readKeyFields(w http.ResponseWriter, r *http.Request) (*keyFields, bool) {
	var b keyBody
	if !readBody(w, r, &b) {
		return nil, false
	}
	f := &keyFields{name: b.Name, model: b.Model, team: b.Team, disabled: b.Disabled}
	if !readPolicy(w, &b.policyBody, &f.policyFields) {
		return nil, false
	}
	if b.ExpiresAt != nil {
		at, msg := readInstant(b.ExpiresAt)
		if msg != "" {
			writeError(w, http.StatusBadRequest, apierror.Invalid, "invalid_field", "expires_at: "+msg)
			return nil, false
		}
		f.expiresAt = &at
	}
	return f, true
}

// readTeamFields reads the body of r, an TeamRequest, as
// readKeyFields reads a key's.
func readTeamFields(w http.ResponseWriter, r *http.Request) (*teamFields, bool) {
	var b teamBody
	if !readBody(w, r, &b) {
		return nil, false
	}
	f := &teamFields{name: b.Name}
	if !readPolicy(w, &b.policyBody, &f.policyFields) {
		return nil, false
	}
	return f, true
}

// readPolicy reads the policy fields b of a request about a key or a team
// into f, checking what can be checked without the key store: the lists'
// lengths, the types and the durations. It answers 400 and returns false
// when a field is wrong. "windows": [] is no token window (a policy of
// budgets alone, or metered only), as a POST without "windows" is.
func readPolicy(w http.ResponseWriter, b *policyBody, f *policyFields) bool {
	if p := parsePolicy(b, f); p.status != 0 {
		writeError(w, p.status, apierror.Invalid, p.code, p.msg)
		return false
	}
	return true
}

// parsePolicy is readPolicy's parse: what is wrong with b, if anything.
func parsePolicy(b *policyBody, f *policyFields) problem {
	models, msg := readList(b.Models, "models", keystore.MaxModels)
	if msg == "" && models != nil {
		f.models, msg = readModels(models, "models")
	}
	if msg != "" {
		return badField("%s", msg)
	}
	if p := readLimits(&b.limitsBody, "", &f.limitsFields); p.status != 0 {
		return p
	}
	return readSubs(b, f)
}

// ReadPolicy reads a policy written as the policy fields of a KeyRequest
// ("windows", "budgets", "models", "requests_per_minute",
// "max_concurrent", "model_limits", "end_users") from r, at most MaxBody
// bytes, into p: the fields it gives replace p's. Its errors name the
// field as the API's answers do ("model_limits[0].windows[1].limit");
// what only the key store checks, it checks when p is used.
func ReadPolicy(r io.Reader, p *keystore.Policy) error {
	var b policyBody
	if _, _, msg := decodeStrict(io.LimitReader(r, MaxBody+1), &b, ""); msg != "" {
		return fmt.Errorf("%s: %w", msg, keystore.ErrInvalid)
	}
	var f policyFields
	if pr := parsePolicy(&b, &f); pr.status != 0 {
		return fmt.Errorf("%s: %w", pr.msg, keystore.ErrInvalid)
	}
	f.applyTo(p)
	return nil
}

// problem is what is wrong with a request's field: the answer's status,
// error code and message; status 0 when nothing is.
type problem struct {
	status    int
	code, msg string
}

// badField is a problem of status 400 invalid_field.
func badField(format string, args ...any) problem {
	return problem{http.StatusBadRequest, "invalid_field", fmt.Sprintf(format, args...)}
}

// readLimits reads the limits b of a policy, a model limit or the end
// users, whose fields' names start with prefix ("model_limits[0]."),
// into f.
func readLimits(b *limitsBody, prefix string, f *limitsFields) problem {
	f.rpm, f.maxConcurrent = b.RequestsPerMinute, b.MaxConcurrent
	windows, msg := readList(b.Windows, prefix+"windows", keystore.MaxWindows)
	budgets, msg2 := readList(b.Budgets, prefix+"budgets", keystore.MaxBudgets)
	if msg = cmp.Or(msg, msg2); msg != "" {
		return badField("%s", msg)
	}
	if windows != nil {
		f.windows = make([]keystore.Window, len(windows))
		for i, raw := range windows {
			var p problem
			if f.windows[i], p.status, p.code, p.msg = readWindow(raw, fmt.Sprintf("%swindows[%d]", prefix, i), f.windows[:i]); p.status != 0 {
				return p
			}
		}
	}
	if budgets != nil {
		bs := make([]keystore.Budget, len(budgets))
		for i, raw := range budgets {
			var p problem
			if bs[i], p.status, p.code, p.msg = parseBudget(raw, fmt.Sprintf("%sbudgets[%d]", prefix, i)); p.status != 0 {
				return p
			}
		}
		f.budgets = &bs
	}
	if f.rpm != nil && *f.rpm < 0 {
		return badField("%srequests_per_minute: want 0 (no limit) or more, got %d", prefix, *f.rpm)
	}
	if f.maxConcurrent != nil && *f.maxConcurrent < 0 {
		return badField("%smax_concurrent: want 0 (no limit) or more, got %d", prefix, *f.maxConcurrent)
	}
	return problem{}
}

// readModels reads the elements of "models", each a model name or glob.
func readModels(elems []json.RawMessage, field string) (*[]string, string) {
	models := make([]string, len(elems))
	for i, raw := range elems {
		if err := json.Unmarshal(raw, &models[i]); err != nil {
			return nil, fmt.Sprintf("%s[%d]: want a string, a model name or glob (gpt-4o, claude-*)", field, i)
		}
		if strings.TrimSpace(models[i]) == "" {
			return nil, fmt.Sprintf("%s[%d]: empty: want a model name or glob (gpt-4o, claude-*)", field, i)
		}
	}
	return &models, ""
}

// readWindow reads the window at field ("windows[1]") of a key request,
// the windows before it read already: the answer's status, code and
// message when it is wrong.
func readWindow(raw json.RawMessage, field string, before []keystore.Window) (win keystore.Window, status int, code, msg string) {
	var wr WindowRequest
	if status, code, msg := decodeStrict(bytes.NewReader(raw), &wr, field); status != 0 {
		return win, status, code, msg
	}
	bad := func(format string, args ...any) (keystore.Window, int, string, string) {
		return win, http.StatusBadRequest, "invalid_field", fmt.Sprintf(format, args...)
	}
	var err error
	if win.Window, err = positiveDuration(wr.Window); err != nil {
		return bad("%s.window: %q: %v", field, wr.Window, err)
	}
	if wr.Limit <= 0 {
		return bad("%s.limit: want a positive number of tokens, got %d", field, wr.Limit)
	}
	win.Limit = wr.Limit
	if wr.Bucket != "" {
		if win.Bucket, err = positiveDuration(wr.Bucket); err != nil {
			return bad("%s.bucket: %q: %v", field, wr.Bucket, err)
		}
	}
	if j := slices.IndexFunc(before, func(o keystore.Window) bool { return o.Window == win.Window }); j >= 0 {
		list := field[:strings.LastIndexByte(field, '[')] // "windows", "model_limits[0].windows"
		return bad("%s.window: %q: %s[%d] is a %v window already: give each length once", field, wr.Window, list, j, win.Window)
	}
	return win, 0, "", ""
}

// parseBudget reads the budget at field ("budgets[0]") of a key request:
// the answer's status, code and message when it is wrong. What the key
// store checks (a positive limit, a bucket dividing the window) it
// reports itself.
func parseBudget(raw json.RawMessage, field string) (b keystore.Budget, status int, code, msg string) {
	var br struct { // BudgetRequest, the limit read apart to name it in errors
		LimitUSD json.RawMessage `json:"limit_usd"`
		Window   string          `json:"window"`
		Period   string          `json:"period"`
		Timezone string          `json:"timezone"`
	}
	if status, code, msg := decodeStrict(bytes.NewReader(raw), &br, field); status != 0 {
		return b, status, code, msg
	}
	bad := func(format string, args ...any) (keystore.Budget, int, string, string) {
		return b, http.StatusBadRequest, "invalid_field", fmt.Sprintf(format, args...)
	}
	if err := b.Limit.UnmarshalJSON(br.LimitUSD); err != nil || br.LimitUSD == nil {
		return bad("%s.limit_usd: %s: want an amount in USD, to the nano-dollar (0.000000001)", field, br.LimitUSD)
	}
	var err error
	switch {
	case (br.Window == "") == (br.Period == ""):
		return bad(`%s: give "window" (a Go duration, as "24h") or "period" ("day", "week" or "month"), one of them`, field)
	case br.Window != "":
		if br.Timezone != "" {
			return bad("%s.timezone: a rolling window has no time zone: give a period", field)
		}
		if b.Window, err = positiveDuration(br.Window); err != nil {
			return bad("%s.window: %q: %v", field, br.Window, err)
		}
	default:
		if b.Period, err = strategies.ParsePeriod(br.Period); err != nil {
			return bad(`%s.period: %q: want "day", "week" or "month"`, field, br.Period)
		}
		if br.Timezone != "" {
			if b.Location, err = time.LoadLocation(br.Timezone); err != nil || br.Timezone == "Local" {
				return bad("%s.timezone: %q: want an IANA time zone, as Europe/Paris or UTC", field, br.Timezone)
			}
		}
	}
	return b, 0, "", ""
}

// readInstant reads an RFC 3339 instant or null (the zero instant: never),
// and what is wrong with it, if anything.
func readInstant(raw json.RawMessage) (time.Time, string) {
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, "want an RFC 3339 instant as a string, or null for never"
	}
	if s == nil || *s == "" {
		return time.Time{}, ""
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		return time.Time{}, fmt.Sprintf("%q: want an RFC 3339 instant (2027-01-01T00:00:00Z), or null for never", *s)
	}
	return t.UTC(), ""
}

// positiveDuration parses a Go duration that must be positive.
func positiveDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, errors.New("not a duration: want a Go duration, as 5h, 90m or 168h")
	case d <= 0:
		return 0, errors.New("want a positive duration")
	}
	return d, nil
}

// decodeStrict decodes the one JSON object of rd into v, refusing fields
// v does not have. It returns the status, error code and message of the
// answer when it cannot: 400 invalid_field for a field of the wrong type
// or unknown, 400 invalid_json for a body that is not one JSON value, 413
// for a body over MaxBody. field, when not "", is the field rd is the
// value of, for messages.
func decodeStrict(rd io.Reader, v any, field string) (status int, code, msg string) {
	at := func(name string) string {
		switch {
		case field == "":
			return name
		case name == "":
			return field
		}
		return field + "." + name
	}
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			var mbe *http.MaxBytesError
			if errors.As(terr, &mbe) {
				err = terr
			} else {
				return http.StatusBadRequest, "invalid_json", "the body holds more than one JSON value: want one object"
			}
		}
	}
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case err == nil:
		return 0, "", ""
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("the body is larger than %d bytes", mbe.Limit)
	case errors.Is(err, io.EOF) && field == "":
		return http.StatusBadRequest, "invalid_json", "the body is empty: want a JSON object"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return http.StatusBadRequest, "invalid_json", "the body is not valid JSON: it ends too early"
	case errors.As(err, &se):
		return http.StatusBadRequest, "invalid_json", fmt.Sprintf("the body is not valid JSON: %v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		want := "an object"
		if te.Type != nil {
			want = jsonKind(te.Type.String())
		}
		where := at(te.Field)
		if where == "" {
			where = "the body"
		}
		return http.StatusBadRequest, "invalid_field", fmt.Sprintf("%s: want %s, got a JSON %s", where, want, te.Value)
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if field == "" {
			return http.StatusBadRequest, "invalid_field", "unknown field " + name
		}
		return http.StatusBadRequest, "invalid_field", fmt.Sprintf("%s: unknown field %s", field, name)
	}
	return http.StatusBadRequest, "invalid_json", fmt.Sprintf("the body is not a valid key request: %v", err)
}

// jsonKind names the JSON a Go type of the requests is read from.
func jsonKind(goType string) string {
	goType = strings.TrimLeft(goType, "*")
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"):
		return "a whole number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}
