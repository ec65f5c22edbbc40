package sdktest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/internal/logbuf"
	"github.com/ratestore/ratestore/keystore"
)

// The end users of keys (keystore.Policy.EndUsers, gateway.EndUserHeader)
// and a model limit (Policy.ModelLimits), through the official clients:
// the scenarios of endusers.mjs, on each backend. See TestSDKEndUsers.

const (
	// euSpan is the span of every window of the end-user keys: an hour,
	// so that a refusal's Retry-After is past maxRetryWait and the
	// clients, with their default retries, fail at once.
	euSpan = time.Hour
	// overWindow is the token window of each end user of the "over" key,
	// and modelWindow that of the "model" key's gpt-4o* requests: room for
	// one call of max_tokens 10 (its bytes/4 + 10, about 35, reserved; 18
	// charged), not for a second.
	overWindow  = 40
	modelWindow = 40
	// namedWindow is the window of each end user of the "named" and
	// "required" keys: room for every call.
	namedWindow = 100_000

	chatCharge = inTokens + outTokens // a chat completion or a message
	respCharge = respIn + respOut     // a completed response
)

// euCall is a call of endusers.mjs that succeeds: the end user it is
// charged to ("" none), what it is charged, and the end-user fields of the
// body the upstream must get, as the client sent them.
type euCall struct {
	name, role, endUser string
	charge              int64
	usage               map[string]int64 // what the client sees; nil: none
	upstream            map[string]string
}

// euRefusal is a call of endusers.mjs that the gateway refuses.
type euRefusal struct {
	name, role string
	status     int
	errorName  string // the client's error class
	code       string
	message    string // the API's error message starts so
	endUser    string // the name the client's own message must hold; "" none
}

// upstreamCall is what the fake upstream got during a scenario.
type upstreamCall struct {
	scenario, path, model string
	header                http.Header
	fields                map[string]string // the body's user, safety_identifier and metadata.user_id that it has
}

// TestSDKEndUsers runs endusers.mjs through a gateway on each backend,
// and on badger, with four keys:
//
//   - "named": each end user has its own window. The openai client's user
//     on chat completions (JSON, streamed with and without include_usage),
//     its safety_identifier on responses (JSON, streamed; user ahead of it
//     when both are given), Anthropic's metadata.user_id (messages.create,
//     JSON and stream: true), a name of 256 bytes and one beyond ASCII:
//     each end user is charged exactly the usage the upstream reported
//     (EndUserUsage), and the key all of them and its own traffic. The
//     header, in a client's defaultHeaders, wins over the body's user,
//     safety_identifier or metadata.user_id, and is never forwarded; the
//     body goes to the upstream as the client wrote it.
//   - "over": each end user has 40 tokens an hour. An end user's second
//     call is refused, 429 rate_limit_exceeded, RateLimitError naming the
//     end user, at once (x-should-retry: false: one request, with the
//     clients' default retries), whether named in the body or the header;
//     another end user and the key's own traffic pass.
//   - "required": a call naming no end user, or an empty one, is 400
//     end_user_required (BadRequestError), one request; one naming its
//     end user passes.
//   - invalid names (300 bytes as user, safety_identifier,
//     metadata.user_id and the header; a tab): 400 invalid_end_user, and
//     the upstream never sees the request.
//   - "model": a model limit of 40 tokens an hour on gpt-4o*: the second
//     gpt-4o call, and a gpt-4o-mini one, are refused naming the limit;
//     calls to other models pass.
func TestSDKEndUsers(t *testing.T) {
	node := needNode(t)
	// The end users' and model limits' states are states of their own in
	// each backend: on badger as well.
	for _, b := range append(backends[:len(backends):len(backends)], "badger") {
		t.Run(b, func(t *testing.T) { runEndUsers(t, node, b) })
	}
}

func runEndUsers(t *testing.T, node, b string) {
	ctx := context.Background()
	ks, newGateway := openBackend(t, b)
	room := []keystore.Window{{Limit: 1 << 30, Window: 5 * time.Hour}}
	policies := map[string]keystore.Policy{
		"named": {Windows: room, EndUsers: keystore.EndUsers{Windows: []keystore.Window{{Limit: namedWindow, Window: euSpan}}}},
		"over":  {Windows: room, EndUsers: keystore.EndUsers{Windows: []keystore.Window{{Limit: overWindow, Window: euSpan}}}},
		"required": {Windows: room, EndUsers: keystore.EndUsers{Required: true,
			Windows: []keystore.Window{{Limit: namedWindow, Window: euSpan}}}},
		"model": {Windows: room, ModelLimits: []keystore.ModelLimit{{Models: []string{"gpt-4o*"},
			Windows: []keystore.Window{{Limit: modelWindow, Window: euSpan}}}}},
	}
	keys, secrets := map[string]keystore.Key{}, map[string]string{}
	for role, p := range policies {
		k, secret, err := ks.Create(ctx, keystore.Spec{Name: role, Policy: p})
		if err != nil {
			t.Fatal(err)
		}
		keys[role], secrets[role] = k, secret
	}

	// The upstream notes each request it gets under the scenario whose
	// request the gateway got last (endusers.mjs runs them one at a time).
	var scenario atomic.Value
	scenario.Store("")
	var upMu sync.Mutex
	var upCalls []upstreamCall
	up := &upstream{}
	up.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var f struct {
			Model    string  `json:"model"`
			User     *string `json:"user"`
			Safety   *string `json:"safety_identifier"`
			Metadata *struct {
				UserID *string `json:"user_id"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(body, &f); err != nil {
			up.problem("%s: body %q: %v", r.URL.Path, body, err)
		}
		c := upstreamCall{scenario: scenario.Load().(string), path: r.URL.Path, model: f.Model, header: r.Header.Clone(), fields: map[string]string{}}
		for name, v := range map[string]*string{"user": f.User, "safety_identifier": f.Safety} {
			if v != nil {
				c.fields[name] = *v
			}
		}
		if f.Metadata != nil && f.Metadata.UserID != nil {
			c.fields["metadata.user_id"] = *f.Metadata.UserID
		}
		upMu.Lock()
		upCalls = append(upCalls, c)
		upMu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		up.serve(w, r)
	}))
	t.Cleanup(up.Close)
	upstreamOf := func(name string) []upstreamCall {
		upMu.Lock()
		defer upMu.Unlock()
		var out []upstreamCall
		for _, c := range upCalls {
			if c.scenario == name {
				out = append(out, c)
			}
		}
		return out
	}

	upURL, _ := url.Parse(up.URL)
	var logs logbuf.Buffer
	gw, err := newGateway(gateway.Options{Upstream: upURL, UpstreamKey: upstreamKey,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	var seen tally
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("X-Sdktest-Scenario")
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		scenario.Store(name)
		seen.add(name, len(body))
		gw.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	keysJSON, _ := json.Marshal(secrets)
	got := runNode(t, node, "endusers.mjs", []string{"BASE_URL=" + srv.URL, "KEYS=" + string(keysJSON),
		"TIMEOUT_MS=15000", "SCENARIOS="}, nil)
	waitCtx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := gw.Wait(waitCtx); err != nil {
		t.Fatalf("gateway still serving: %v; gateway log:\n%s", err, logs.String())
	}
	t.Cleanup(func() {
		if strings.Contains(logs.String(), "estimated") {
			t.Error(`a charge was the estimate: the gateway log says "estimated"`)
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})

	chatUsage := map[string]int64{"prompt_tokens": inTokens, "completion_tokens": outTokens, "total_tokens": chatCharge}
	msgUsage := map[string]int64{"input_tokens": inTokens, "output_tokens": outTokens}
	respUsage := map[string]int64{"input_tokens": respIn, "output_tokens": respOut, "total_tokens": respCharge}
	long256 := strings.Repeat("y", 256)
	calls := []euCall{
		{"openai/chat_user", "named", "u-chat", chatCharge, chatUsage, map[string]string{"user": "u-chat"}},
		{"openai/chat_stream_user", "named", "u-chat-stream", chatCharge, chatUsage, map[string]string{"user": "u-chat-stream"}},
		{"openai/chat_stream_no_usage_user", "named", "u-chat-stream-nu", chatCharge, nil, map[string]string{"user": "u-chat-stream-nu"}},
		{"openai/responses_safety_identifier", "named", "u-resp", respCharge, respUsage, map[string]string{"safety_identifier": "u-resp"}},
		{"openai/responses_stream_safety_identifier", "named", "u-resp-stream", respCharge, respUsage, map[string]string{"safety_identifier": "u-resp-stream"}},
		{"openai/responses_user_and_safety_identifier", "named", "u-resp-user", respCharge, respUsage,
			map[string]string{"user": "u-resp-user", "safety_identifier": "u-resp-safety"}},
		{"anthropic/messages_user_id", "named", "u-msg", chatCharge, msgUsage, map[string]string{"metadata.user_id": "u-msg"}},
		{"anthropic/messages_stream_user_id", "named", "u-msg-stream", chatCharge, msgUsage, map[string]string{"metadata.user_id": "u-msg-stream"}},
		{"openai/chat_user_256_bytes", "named", long256, chatCharge, chatUsage, map[string]string{"user": long256}},
		{"openai/chat_user_unicode", "named", "jürgen-用户", chatCharge, chatUsage, map[string]string{"user": "jürgen-用户"}},
		{"openai/chat_no_end_user", "named", "", chatCharge, chatUsage, map[string]string{}},
		{"openai/header_over_user", "named", "u-header", chatCharge, chatUsage, map[string]string{"user": "u-body"}},
		{"anthropic/header_over_user_id", "named", "u-header", chatCharge, msgUsage, map[string]string{"metadata.user_id": "u-body"}},
		{"openai/header_over_safety_identifier", "named", "u-header-resp", respCharge, respUsage, map[string]string{"safety_identifier": "u-body"}},

		{"openai/over_first", "over", "u-over", chatCharge, chatUsage, map[string]string{"user": "u-over"}},
		{"openai/over_other", "over", "u-other", chatCharge, chatUsage, map[string]string{"user": "u-other"}},
		{"openai/over_key_own", "over", "", chatCharge, chatUsage, map[string]string{}},

		{"openai/required_named", "required", "u-req", chatCharge, chatUsage, map[string]string{"user": "u-req"}},
		{"anthropic/required_named", "required", "u-req", chatCharge, msgUsage, map[string]string{"metadata.user_id": "u-req"}},
		{"openai/required_header", "required", "u-req", respCharge, respUsage, map[string]string{}},

		{"openai/model_first", "model", "", chatCharge, chatUsage, map[string]string{}},
		{"openai/model_other", "model", "", chatCharge, chatUsage, map[string]string{}},
		{"anthropic/model_other", "model", "", chatCharge, msgUsage, map[string]string{}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			d := succeeded(t, got, c.name)
			if d.Text != reply {
				t.Errorf("text %q, want %q", d.Text, reply)
			}
			if c.usage == nil && d.Usage != nil {
				t.Errorf("usage %v in a stream that did not ask for it", d.Usage)
			}
			usageIs(t, d.Usage, c.usage)
			if n, _ := seen.get(c.name); n != 1 {
				t.Errorf("the gateway got %d requests for the call, want 1", n)
			}
			ups := upstreamOf(c.name)
			if len(ups) != 1 {
				t.Fatalf("the upstream got %d requests, want 1", len(ups))
			}
			// The end user's header is the gateway's; the body goes on as
			// the client wrote it.
			if v := ups[0].header.Values(gateway.EndUserHeader); len(v) != 0 {
				t.Errorf("the upstream got %s: %q", gateway.EndUserHeader, v)
			}
			if !maps.Equal(ups[0].fields, c.upstream) {
				t.Errorf("the upstream got the end-user fields %q, want %q", ups[0].fields, c.upstream)
			}
		})
	}

	usage := func(t *testing.T, role, endUser string) keystore.Usage {
		t.Helper()
		var u keystore.Usage
		var err error
		if endUser == "" {
			u, err = ks.Usage(ctx, keys[role].ID)
		} else {
			u, err = ks.EndUserUsage(ctx, keys[role].ID, endUser)
		}
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	// Each end user is charged exactly the usage of its calls, in its own
	// window; each key the usage of all its calls, its end users' and its
	// own. Refusals are charged nothing.
	endUsers := map[[2]string]int64{
		{"named", "u-resp-safety"}: 0, // named only after user
		{"named", "u-body"}:        0, // named only after the header
		{"over", "u-over"}:         0,
	}
	keyTotals := map[string]int64{}
	for _, c := range calls {
		keyTotals[c.role] += c.charge
		if c.endUser != "" {
			endUsers[[2]string{c.role, c.endUser}] += c.charge
		}
	}
	t.Run("charges", func(t *testing.T) {
		for eu, want := range endUsers {
			u := usage(t, eu[0], eu[1])
			if u.Used != want || u.InFlight != 0 {
				t.Errorf("end user %.20q of key %s used %d tokens with %d in flight, want %d, none in flight", eu[1], eu[0], u.Used, u.InFlight, want)
			}
			limit := int64(namedWindow)
			if eu[0] == "over" {
				limit = overWindow
			}
			if len(u.Windows) != 1 || u.Limit != limit {
				t.Errorf("end user %.20q of key %s: windows %+v, limit %d; want one window of %d", eu[1], eu[0], u.Windows, u.Limit, limit)
			}
		}
		for role, want := range keyTotals {
			u := usage(t, role, "")
			if u.Used != want || u.InFlight != 0 {
				t.Errorf("key %s used %d tokens with %d in flight, want %d, none in flight", role, u.Used, u.InFlight, want)
			}
		}
		// A key without end-user limits has no end-user usage.
		if u := usage(t, "model", "u-x"); u.Binding != -1 || u.Used != 0 {
			t.Errorf("an end user of the model key: %+v, want no window", u)
		}
	})

	window := func(owner string, limit int) string {
		return owner + " is over its " + euSpan.String() + " token window: " + strconv.Itoa(limit) + " tokens; retry after "
	}
	overUser := `end user "u-over" of key ` + keys["over"].ID
	required := "key " + keys["required"].ID + " requires each request to name its end user: send " + gateway.EndUserHeader
	bodyName := "the end user's name (user, safety_identifier or metadata.user_id) "
	tooLong := "is 300 bytes long, more than 256"
	models := "key " + keys["model"].ID + "'s limit on models gpt-4o*"
	refusals := []euRefusal{
		{"openai/over_refused", "over", 429, "RateLimitError", "rate_limit_exceeded", window(overUser, overWindow), "u-over"},
		{"anthropic/over_refused", "over", 429, "RateLimitError", "rate_limit_exceeded", window(overUser, overWindow), "u-over"},
		{"openai/over_refused_header", "over", 429, "RateLimitError", "rate_limit_exceeded", window(overUser, overWindow), "u-over"},
		{"openai/required_missing", "required", 400, "BadRequestError", "end_user_required", required, ""},
		{"openai/required_empty", "required", 400, "BadRequestError", "end_user_required", required, ""},
		{"anthropic/required_missing", "required", 400, "BadRequestError", "end_user_required", required, ""},
		{"openai/invalid_user_long", "named", 400, "BadRequestError", "invalid_end_user", bodyName + tooLong, ""},
		{"openai/invalid_safety_identifier_long", "named", 400, "BadRequestError", "invalid_end_user", bodyName + tooLong, ""},
		{"anthropic/invalid_user_id_long", "named", 400, "BadRequestError", "invalid_end_user", bodyName + tooLong, ""},
		{"openai/invalid_header_long", "named", 400, "BadRequestError", "invalid_end_user", gateway.EndUserHeader + ": the end user's name " + tooLong, ""},
		{"openai/invalid_user_control", "named", 400, "BadRequestError", "invalid_end_user", bodyName + "holds the control character U+0009", ""},
		{"openai/model_refused", "model", 429, "RateLimitError", "rate_limit_exceeded", window(models, modelWindow), ""},
		{"openai/model_refused_mini", "model", 429, "RateLimitError", "rate_limit_exceeded", window(models, modelWindow), ""},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			r, ok := got[c.name]
			if !ok {
				t.Fatal("no result")
			}
			n, bodyLen := seen.get(c.name)
			t.Logf("%s %d in %dms, %d request(s) of %d bytes (Retry-After %s, x-should-retry %s): %s", r.ErrorName, r.Status, r.ElapsedMS,
				n, bodyLen, deref(r.RetryAfter), deref(r.ShouldRetry), deref(r.APIMessage))
			if r.OK || r.Status != c.status || r.ErrorName != c.errorName {
				t.Fatalf("ok %v, %s %d (%q), want %s %d", r.OK, r.ErrorName, r.Status, r.ErrorMessage, c.errorName, c.status)
			}
			if deref(r.Code) != c.code {
				t.Errorf("code %q, want %q", deref(r.Code), c.code)
			}
			if m := deref(r.APIMessage); !strings.HasPrefix(m, c.message) {
				t.Errorf("api message %q, want it to start %q", m, c.message)
			}
			if c.endUser != "" && !strings.Contains(r.ErrorMessage, c.endUser) {
				t.Errorf("the error's message %q does not name the end user %q", r.ErrorMessage, c.endUser)
			}
			wantType := "invalid_request_error"
			if c.status == http.StatusTooManyRequests {
				wantType = "rate_limit_error"
				// The premise of these refusals: the call reserves (bytes/4 +
				// max_tokens 10) more than the window has left after one call
				// (40 - 18), and no more than the window holds, so that it fits
				// again once the first call's charge leaves it. A client that
				// sends a larger body breaks it: say so, not only that the
				// message differs.
				limit := int64(overWindow)
				if c.role == "model" {
					limit = modelWindow
				}
				if reserve := int64(bodyLen)/4 + 10; reserve <= limit-chatCharge || reserve > limit {
					t.Errorf("the call reserved %d tokens (%d bytes/4 + 10): the scenario needs more than %d, at most %d",
						reserve, bodyLen, limit-chatCharge, limit)
				}
				// An hour away: Retry-After says so, and x-should-retry:
				// false keeps the clients from waiting it out.
				wait, err := strconv.Atoi(deref(r.RetryAfter))
				if err != nil || wait < 60 || wait > int(euSpan/time.Second) || deref(r.ShouldRetry) != "false" {
					t.Errorf("Retry-After %q, x-should-retry %q; want up to an hour, and false", deref(r.RetryAfter), deref(r.ShouldRetry))
				}
			}
			if deref(r.ErrorType) != wantType {
				t.Errorf("error type %q, want %q", deref(r.ErrorType), wantType)
			}
			// The clients' default retries: one request, refused at once.
			if n != 1 {
				t.Errorf("the gateway got %d requests for the call, want 1 (the client retried)", n)
			}
			if r.ElapsedMS >= 5000 {
				t.Errorf("took %v, want < 5s", time.Duration(r.ElapsedMS)*time.Millisecond)
			}
			if ups := upstreamOf(c.name); len(ups) != 0 {
				t.Errorf("the upstream got %d requests of a refused call", len(ups))
			}
			for _, s := range secrets {
				if strings.Contains(r.ErrorMessage, s) {
					t.Error("message echoes a secret")
				}
			}
		})
	}
	upMu.Lock()
	total := len(upCalls)
	upMu.Unlock()
	if total != len(calls) {
		t.Errorf("the upstream got %d requests, want %d: one for each call that passed, none else", total, len(calls))
	}
	for _, p := range up.Problems() {
		t.Errorf("upstream: %s", p)
	}
	if n := len(got) - 1; n != len(calls)+len(refusals) { // less the versions line
		t.Errorf("endusers.mjs printed %d results, the test knows %d", n, len(calls)+len(refusals))
	}
}
