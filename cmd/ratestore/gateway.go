package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/gateway"
)

// The gateway command's defaults.
const (
	defaultListen   = "127.0.0.1:8080" // loopback: reachable from this host only
	upstreamKeyEnv  = "RATESTORE_UPSTREAM_KEY"
	defaultShutdown = 30 * time.Second
)

// gatewayHelp is the help text of the gateway command.
const gatewayHelp = `A reverse proxy in front of a model API that meters tokens per API key (see
package gateway). Callers send their ratestore secret as "Authorization:
Bearer <secret>", "X-API-Key: <secret>" or "x-goog-api-key: <secret>".
Each key's whole policy is enforced (keys create --limit/--window, --rpm,
--max-concurrent, --models): unknown keys get 401, disabled or expired ones
and models the key may not use 403, a request over a token window, the
request rate or the concurrency cap 429 with Retry-After (and
x-should-retry: false when waiting will not help within a minute, so that the
SDKs fail at once). Errors have the body the official SDKs read:
{"type":"error","error":{"type","code","message"}}. --rps limits every key's
request rate alike, on top.

A model call (a request whose JSON body or Gemini path names a model) reserves
request bytes/4 + its max_tokens (max_output_tokens, max_completion_tokens,
generationConfig.maxOutputTokens), or --default-max-tokens, in every window
while it runs; at its end the tokens the response reports (OpenAI's
usage.total_tokens, Anthropic's input, output and prompt-cache tokens; JSON or
streamed, with the usage of an OpenAI stream asked for when the caller did not)
are charged instead. When no usage can be read (the upstream failed,
timed out or broke off a stream, the caller hung up) the reservation is
charged and logged at warn as estimated. GET, HEAD and DELETE are never
charged tokens but count against the request rate and concurrency. Request
bodies over --max-request-body get 413. The upstream gets --connect-timeout
to accept a connection, --first-byte-timeout to send its response header
(504 when it does not) and --idle-timeout between reads of a response body (a
stream silent longer is ended); 0 means no bound. GET --stats-path shows
callers their own usage.

The callers' key fields are never forwarded. The upstream's own credential
comes from --upstream-key or, better (a flag shows in the process list), from
$` + upstreamKeyEnv + `; it is sent in --upstream-key-header. Without one,
requests go out with no credential.

It listens on ` + defaultListen + ` unless told otherwise: loopback only. Logs go to
stderr (JSON lines with --json). SIGINT or SIGTERM stops it: requests in
flight get --shutdown-timeout to finish, then the database is closed, which
writes every change to disk.`

// gatewayOut is what the gateway command prints once it listens.
type gatewayOut struct {
	Listen     string  `json:"listen"`
	Upstream   string  `json:"upstream"`
	StatsPath  string  `json:"stats_path"`
	RPS        float64 `json:"rps"`
	Burst      int64   `json:"burst"`
	Durability string  `json:"durability"`
}

func gatewayCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	listen := fs.String("listen", defaultListen, "the `address` to serve on (default "+defaultListen+")")
	upstream := fs.String("upstream", "", "the `URL` of the model API to forward to (required)")
	upstreamKey := fs.String("upstream-key", "", "the `key` sent to the upstream (default $"+upstreamKeyEnv+")")
	keyHeader := fs.String("upstream-key-header", "Authorization", "the `field` the upstream key goes in: Authorization, as a bearer token, or any other (x-api-key), as it is")
	rps := fs.Float64("rps", 0, "each key's request `rate` per second (0: no limit)")
	burst := fs.Int64("burst", 0, "each key's burst of `requests`; 0: the rate rounded up")
	statsPath := fs.String("stats-path", gateway.DefaultStatsPath, "the `path` that shows callers their own usage (default "+gateway.DefaultStatsPath+")")
	durability := fs.String("durability", ratestore.Sync.String(), "the durability `mode`: sync, usage on disk as each request ends (the default), or async, written every 100ms (a crash loses the last)")
	shutdown := fs.Duration("shutdown-timeout", defaultShutdown, "how long requests in flight may take to finish when stopped (default 30s)")
	maxTokens := fs.Int64("default-max-tokens", gateway.DefaultMaxTokens, "the output `tokens` reserved for a model call that names no max_tokens (default 4096)")
	maxBody := fs.Int64("max-request-body", gateway.DefaultMaxRequestBody, "the largest request body, in `bytes`; larger ones get 413 (default 32 MiB)")
	connect := fs.Duration("connect-timeout", gateway.DefaultConnectTimeout, "how long connecting to the upstream may take (default 10s; 0: no bound)")
	firstByte := fs.Duration("first-byte-timeout", gateway.DefaultFirstByteTimeout, "how long the upstream may take to send its response header, after which the caller gets 504 (default 10m: a non-streamed response's header comes after the whole generation; 0: no bound)")
	idle := fs.Duration("idle-timeout", gateway.DefaultIdleTimeout, "how long the upstream may leave a response body silent between reads; a stream silent longer is ended (default 1m; 0: no bound)")
	return func([]string) error {
		const cmd = "gateway"
		u, err := url.Parse(*upstream)
		switch {
		case *upstream == "":
			return usagef(cmd, "%s: --upstream is required", cmd)
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
			return usagef(cmd, "%s: --upstream %q: want an http or https URL", cmd, *upstream)
		case !(*rps >= 0) || math.IsInf(*rps, 0) || *burst < 0 || (*burst > 0 && *rps == 0):
			return usagef(cmd, "%s: --rps %v --burst %d: want a rate >= 0, and a burst >= 0 only with a rate", cmd, *rps, *burst)
		case *shutdown <= 0:
			return usagef(cmd, "%s: --shutdown-timeout %v: want a positive duration", cmd, *shutdown)
		case *maxTokens <= 0:
			return usagef(cmd, "%s: --default-max-tokens %d: want a positive number", cmd, *maxTokens)
		case *maxBody <= 0:
			return usagef(cmd, "%s: --max-request-body %d: want a positive number of bytes", cmd, *maxBody)
		case *connect < 0 || *firstByte < 0 || *idle < 0:
			return usagef(cmd, "%s: --connect-timeout %v --first-byte-timeout %v --idle-timeout %v: want durations >= 0", cmd, *connect, *firstByte, *idle)
		}
		var dur ratestore.Durability
		switch *durability {
		case ratestore.Sync.String():
		case ratestore.Async.String():
			dur = ratestore.Async
		default:
			return usagef(cmd, "%s: --durability %q: want sync or async", cmd, *durability)
		}
		key := *upstreamKey
		if key == "" {
			key = os.Getenv(upstreamKeyEnv)
		}
		var h slog.Handler = slog.NewTextHandler(c.stderr, nil)
		if c.json {
			h = slog.NewJSONHandler(c.stderr, nil)
		}
		log := slog.New(h)

		db, err := c.openServing(dur, log)
		if err != nil {
			return err
		}
		g, err := gateway.New(db, gateway.Options{
			Upstream: u, UpstreamKey: key, UpstreamKeyHeader: *keyHeader,
			RPS: *rps, Burst: *burst, StatsPath: *statsPath, Logger: log,
			DefaultMaxTokens: *maxTokens, MaxRequestBody: *maxBody,
			ConnectTimeout: noBound(*connect), FirstByteTimeout: noBound(*firstByte), IdleTimeout: noBound(*idle),
		})
		var ln net.Listener
		if err == nil {
			ln, err = net.Listen("tcp", *listen)
		}
		if err != nil {
			db.Close()
			return err
		}
		out := gatewayOut{ln.Addr().String(), u.Redacted(), *statsPath, *rps, *burst, dur.String()}
		return c.serve(ln, g, db, log, *shutdown, out)
	}
}

// noBound maps a timeout flag to its gateway.Options field: 0 (no bound)
// is negative there, where 0 means the default.
func noBound(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// openServing opens the database of the global flags for a server: with
// the durability asked for, and its failures logged.
func (c *cli) openServing(d ratestore.Durability, log *slog.Logger) (*ratestore.DB, error) {
	if ok, err := exists(c.db); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("no database at %s: create a key first (ratestore keys create), or name one with --db", c.db)
	}
	db, err := ratestore.Open(c.db, ratestore.Options{Backend: ratestore.Backend(c.backend), Durability: d, Now: c.now, Logger: log})
	if errors.Is(err, ratestore.ErrLocked) {
		return nil, fmt.Errorf("%s: %w: only one process may open a database at a time; stop the other one, then retry", c.db, ratestore.ErrLocked)
	}
	return db, err
}

// serve serves g on ln until the command's context ends or SIGINT or
// SIGTERM arrives, lets the requests in flight finish for up to timeout,
// and closes db.
func (c *cli) serve(ln net.Listener, g http.Handler, db *ratestore.DB, log *slog.Logger, timeout time.Duration, out gatewayOut) error {
	ctx, stop := signal.NotifyContext(c.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	if a, ok := ln.Addr().(*net.TCPAddr); ok && !a.IP.IsLoopback() {
		log.Warn("gateway: listening beyond loopback: other hosts can reach it", "listen", out.Listen)
	}
	log.Info("gateway: listening", "listen", out.Listen, "upstream", out.Upstream, "durability", out.Durability)
	err := c.emit(out, func(w io.Writer) {
		fmt.Fprintf(w, "gateway listening on http://%s, forwarding to %s\n", out.Listen, out.Upstream)
	})

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	log.Info("gateway: shutting down", "timeout", timeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("gateway: requests still in flight at the shutdown timeout: closing them", "error", serr.Error())
		srv.Close()
	}
	cancel()
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	err = errors.Join(serveErr, err)
	if cerr := db.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	log.Info("gateway: stopped")
	return err
}
