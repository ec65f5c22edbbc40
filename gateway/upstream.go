package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ratestore/ratestore/gateway/meter"
	"github.com/ratestore/ratestore/internal/httpstatus"
)

// upstreamResult is what the upstream answered to a request, and what
// the response's meter found once its body ended: written by forward and
// the meter, in the request's goroutine.
type upstreamResult struct {
	forwarded bool          // the request was sent upstream (not refused by Options.RPS)
	sent      time.Time     // when it was
	latency   time.Duration // from sent to the upstream's response header
	status    int
	err       error
	metered   bool
	used      meter.Usage // what the response reported
}

// errIdle is the cause of an upstream request cancelled because its body
// was idle for longer than Options.IdleTimeout.
var errIdle = errors.New("gateway: upstream idle timeout: no data within the idle timeout")

// errDrain is the cause of an upstream request ended because its caller
// hung up longer than Options.DrainTimeout ago.
var errDrain = errors.New("gateway: the caller hung up, and the upstream did not end within the drain timeout")

// forward sends the admitted request upstream with body, and streams the
// response back to w through its meter. An upstream of a pool that
// answers 429 or 5xx, or cannot be reached, before anything went to the
// caller cools down, and the request goes to the next with room (failover),
// up to Options.UpstreamAttempts; the last answer is the caller's. A
// request that gets no response is refused: 504 when it timed out, else
// 502.
func (g *Gateway) forward(w *httpstatus.Writer, r *http.Request, rq *request, ad *admission, up *upstreamResult, body []byte) *refusal {
	ctx, cancel, done := g.upstreamContext(r.Context(), rq.ep.generates)
	defer func() { // also when the copy panics
		if cause := context.Cause(ctx); (errors.Is(cause, errIdle) || errors.Is(cause, errDrain)) && up.err == nil {
			up.err = cause
		}
		done()
	}()
	var tried []*member
	for {
		m := rq.member
		rq.upstream = m.name
		answered := g.metrics.sent(m.name)
		res, err := g.send(ctx, r, rq, up, m, body)
		v := g.verdict(ctx, rq, res, err)
		m.noteAnswer(v, g.now())
		tried = append(tried, m)
		if v.next && len(tried) < g.attempts && g.failover(ctx, rq, ad, tried) {
			answered(statusOf(res))
			g.log.LogAttrs(ctx, slog.LevelWarn, "gateway: upstream failed, trying the next",
				slog.String("request_id", rq.id), slog.String("upstream", m.name), slog.String("next", rq.member.name),
				slog.Int("status", statusOf(res)), slog.Any("error", err))
			if res != nil {
				res.Body.Close() // unread: a failing upstream may stall its body, and its connection is not worth keeping
			}
			continue
		}
		defer answered(statusOf(res))
		if err != nil {
			return upstreamFailed(ctx, up, err)
		}
		g.respond(w, r, res, rq, ad, up, cancel)
		return nil
	}
}

// send sends the request to upstream m, and returns its response or why
// there is none.
func (g *Gateway) send(ctx context.Context, r *http.Request, rq *request, up *upstreamResult, m *member, body []byte) (*http.Response, error) {
	out := outbound(ctx, r, rq, m, body)
	up.forwarded, up.sent = true, time.Now()
	res, err := g.transport.RoundTrip(out)
	if err == nil && res.StatusCode == http.StatusSwitchingProtocols {
		up.status, up.latency = res.StatusCode, time.Since(up.sent)
		res.Body.Close()
		return nil, fmt.Errorf("gateway: the upstream switched protocols (to %q), which no endpoint asks for", res.Header.Get("Upgrade"))
	}
	if err == nil {
		up.status, up.latency = res.StatusCode, time.Since(up.sent)
	}
	return res, err
}

func statusOf(res *http.Response) int {
	if res == nil {
		return 0
	}
	return res.StatusCode
}

// upstreamContext returns the context of a request's upstream call, ended
// by cancel (with its cause) and by Abort, and done, which ends it once
// the call is over. A model call outlives its caller by up to the drain
// timeout: the upstream generates, and bills, to the end whether the
// caller waits for it or not, so the usage at its end is read (see
// meter). Any other call ends with its caller.
func (g *Gateway) upstreamContext(caller context.Context, generates bool) (ctx context.Context, cancel context.CancelCauseFunc, done func()) {
	parent := caller
	if generates {
		parent = context.WithoutCancel(caller)
	}
	ctx, cancel = context.WithCancelCause(parent)
	unwatch := g.active.watch(cancel)
	if !generates {
		return ctx, cancel, func() { unwatch(); cancel(nil) }
	}
	var drain atomic.Pointer[time.Timer]
	stop := context.AfterFunc(caller, func() {
		if g.drain < 0 {
			cancel(errDrain)
			return
		}
		drain.Store(time.AfterFunc(g.drain, func() { cancel(errDrain) }))
	})
	return ctx, cancel, func() {
		// A timer stored after this Load (the caller hung up as the
		// request ended) only cancels a context that is done.
		if !stop() {
			if t := drain.Load(); t != nil {
				t.Stop()
			}
		}
		unwatch()
		cancel(nil)
	}
}

// noUserAgent is the User-Agent of every upstream request: none (the
// transport would otherwise send Go's).
var noUserAgent = []string{""}

// outbound is the upstream request of r on ctx, to upstream m: see
// Headers in the package documentation.
func outbound(ctx context.Context, r *http.Request, rq *request, m *member, body []byte) *http.Request {
	out := r.WithContext(ctx)
	u := *r.URL
	out.URL = &u
	query := forwardQuery(r.URL.RawQuery, rq.ep.query)
	if m.api == APIAzureOpenAI {
		out.URL.Path, out.URL.RawPath, body = azurePath(rq, m, r.URL.Path, body)
		query = azureQuery(rq.ep, query, m.version)
	}
	(&httputil.ProxyRequest{Out: out}).SetURL(m.url)
	out.URL.RawQuery = query
	out.Header = forwardHeader(r.Header, rq.ep.dialect)
	out.Header["User-Agent"] = noUserAgent
	out.Body, out.ContentLength, out.TransferEncoding, out.Trailer, out.Close = nil, 0, nil, nil, false
	if rq.ep.body() {
		out.Header.Set("Content-Type", "application/json")
		if len(body) > 0 {
			out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		}
	}
	if m.keyField != "" {
		out.Header.Set(m.keyField, m.keyValue)
	}
	return out
}

// upstreamFailed notes err, the failure of an upstream call on ctx that
// got no response, and returns its refusal: 504 when it timed out, else
// 502.
func upstreamFailed(ctx context.Context, up *upstreamResult, err error) *refusal {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		err = fmt.Errorf("%w (%w)", err, cause)
	}
	up.err = err
	if op := (*net.OpError)(nil); errors.As(err, &op) && op.Op == "dial" {
		up.forwarded = false // never reached the upstream: nothing generated
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errIdle) || (errors.As(err, &ne) && ne.Timeout()) {
		return &refusal{status: http.StatusGatewayTimeout, typ: typeAPI, code: "upstream_timeout", msg: "the upstream API did not answer in time"}
	}
	return &refusal{status: http.StatusBadGateway, typ: typeAPI, code: "upstream_unavailable", msg: "the upstream API could not be reached or failed"}
}

// respond streams res to w: its fields by allowlist with the caller's
// own limits, its body through the meter that reads its usage, each
// write flushed at once for a stream or a body of unknown length. Its
// trailers are dropped. A body that cannot be copied to its end (the
// upstream broke off, the caller went away) aborts the caller's response
// (http.ErrAbortHandler), once the meter has read what it could.
func (g *Gateway) respond(w *httpstatus.Writer, r *http.Request, res *http.Response, rq *request, ad *admission, up *upstreamResult, cancel context.CancelCauseFunc) {
	dropHopByHop(res.Header)
	filterResponse(res.Header)
	if ad.adm != nil {
		limitHeaders(res.Header, ad.adm.Limits())
	}
	body := g.meterBody(res, rq, up, cancel)
	defer body.Close()
	h := w.Header()
	for k, vv := range res.Header {
		for _, v := range vv {
			h.Add(k, v)
		}
	}
	w.WriteHeader(res.StatusCode)
	var flush func() error
	if ct, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); ct == "text/event-stream" || res.ContentLength == -1 {
		flush = http.NewResponseController(w).Flush
		flush()
	}
	if err := g.copyBody(w, body, flush); err != nil {
		var re readError
		if errors.As(err, &re) && !errors.Is(err, context.Canceled) {
			g.log.LogAttrs(r.Context(), slog.LevelWarn, "gateway: reading the upstream response failed",
				slog.String("request_id", rq.id), slog.String("error", err.Error()))
		}
		if r.Context().Value(http.ServerContextKey) != nil {
			panic(http.ErrAbortHandler) // the server recovers it, and cuts the response off
		}
	}
}

// meterBody wraps the body of res: each read bounded by
// Options.IdleTimeout (which ends the call with cancel), and, for a body
// whose usage can be read, a meter that notes it in up, and the filter
// that takes out the usage the gateway asked for.
func (g *Gateway) meterBody(res *http.Response, rq *request, up *upstreamResult, cancel context.CancelCauseFunc) io.ReadCloser {
	body := res.Body
	if g.idle > 0 {
		body = newIdleBody(body, g.idle, cancel)
	}
	k := meter.KindOf(res.Header)
	if k == meter.None {
		return body
	}
	m := meter.New(body, k, rq.ep.generates, func(u meter.Usage) {
		up.metered, up.used = true, u
	})
	if rq.stripUsage && k == meter.SSE {
		withoutLength(res)
		return newStripUsage(m, maxStripEvent)
	}
	return m
}

// readError is an error of reading the upstream's response, which
// copyBody returns as it is (not the caller's writes).
type readError struct{ error }

func (e readError) Unwrap() error { return e.error }

// copyBody copies body to w, calling flush (if not nil) after each write.
// It returns the first error of a write, or of a read but io.EOF (a
// readError).
func (g *Gateway) copyBody(w io.Writer, body io.Reader, flush func() error) error {
	buf := g.buffers.get()
	defer g.buffers.put(buf)
	for {
		n, rerr := body.Read(*buf)
		if n > 0 {
			if _, werr := w.Write((*buf)[:n]); werr != nil {
				return werr
			}
			if flush != nil {
				flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return readError{rerr}
		}
	}
}

// dropHopByHop deletes the fields of h that its Connection field names:
// they were the upstream's connection's, not the response's.
func dropHopByHop(h http.Header) {
	for _, f := range h["Connection"] {
		for sf := range strings.SplitSeq(f, ",") {
			if sf = textproto.TrimString(sf); sf != "" {
				h.Del(sf)
			}
		}
	}
}

// idleBody is a response body whose reads each end the request (cancel)
// when they wait longer than idle. The time between reads (spent writing
// to the caller) does not count.
type idleBody struct {
	io.ReadCloser
	idle   time.Duration
	timer  *time.Timer
	cancel context.CancelCauseFunc
}

func newIdleBody(body io.ReadCloser, idle time.Duration, cancel context.CancelCauseFunc) *idleBody {
	b := &idleBody{ReadCloser: body, idle: idle, cancel: cancel}
	b.timer = time.AfterFunc(idle, func() { cancel(errIdle) })
	b.timer.Stop()
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.ReadCloser.Read(p)
	b.timer.Stop()
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}

// buffers are the copy buffers of responses. Without them a response
// allocates 32 KiB, most of what a request allocates, and the garbage
// collector's work shows in the proxy's tail latency.
type buffers struct{ p sync.Pool }

func (b *buffers) get() *[]byte {
	if buf, ok := b.p.Get().(*[]byte); ok {
		return buf
	}
	buf := make([]byte, 32<<10)
	return &buf
}

func (b *buffers) put(buf *[]byte) { b.p.Put(buf) }
