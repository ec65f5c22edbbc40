package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/server"
)

// The serve command's defaults: loopback, the port next to the gateway's
// and the one next to Redis's.
const (
	defaultServeHTTP = "127.0.0.1:8081"
	defaultServeRESP = "127.0.0.1:6380"
	serveTokenEnv    = "RATESTORE_SERVE_TOKEN"
)

const serveHelp = `Serves the database's limiters to programs in other languages on this
machine (see package server): an HTTP API, and a RESP listener that speaks
redis-cell's CL.THROTTLE, so that a Redis client that calls redis-cell calls
ratestore unchanged:

  redis-cli -p 6380 CL.THROTTLE user:1 15 30 60      # 16 at once, 30 per minute
  curl -d '{"limiter": "api", "key": "user:1", "strategy":
    {"type": "gcra", "rate": 10, "burst": 20}}' http://127.0.0.1:8081/v1/allow

The HTTP API takes POST /v1/allow {"limiter", "strategy", "key", "n",
"record"}, the strategy by its "type" (gcra, token_bucket, leaky_bucket,
fixed_window, sliding_window, sliding_log, rolling_window, composite) and its
fields, durations as Go duration strings ("1m30s"); it answers {"allowed",
"limit", "remaining", "reset_after_ms", "retry_after_ms"} with the IETF
RateLimit fields.

With --redis URL the limiters keep their states in that Redis (package
redisstore) instead of the database: several serve processes, on several
machines, given the same Redis share every limit. --durability then does
not apply, and --db is not opened.

It listens on loopback unless told otherwise; --http "" or --resp "" turns a
side off. A token, from --token-file or $` + serveTokenEnv + `, is then
required of every request (Authorization: Bearer TOKEN; AUTH TOKEN), and
listening beyond loopback without one is refused. On SIGINT or SIGTERM it
stops taking requests, finishes those in flight, and closes the database.`

// serveOut is what the serve command prints once it listens.
type serveOut struct {
	HTTP       string `json:"http"` // "" when off
	RESP       string `json:"resp"`
	Durability string `json:"durability"`      // "" with --redis
	Redis      string `json:"redis,omitempty"` // the Redis, its password redacted, with --redis
	Token      bool   `json:"token"`           // whether a token is required
}

// serveCmd registers the serve command's flags on fs and returns the
// command, which runs once fs has parsed them.
func serveCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	f := serveFlagSet(fs)
	return func([]string) error { return c.runServe(f) }
}

// serveFlags are the values of the serve command's flags.
type serveFlags struct {
	httpAddr   string
	respAddr   string
	tokenFile  string
	durability string
	shutdown   time.Duration
	redisURL   string
	redisClock bool
}

// serveFlagSet registers the serve command's flags on fs and returns where
// their values go once fs has parsed them.
func serveFlagSet(fs *flag.FlagSet) *serveFlags {
	f := &serveFlags{}
	fs.StringVar(&f.httpAddr, "http", defaultServeHTTP, "the `address` of the HTTP API (\"\": none)")
	fs.StringVar(&f.respAddr, "resp", defaultServeRESP, "the `address` of the RESP listener (\"\": none)")
	fs.StringVar(&f.tokenFile, "token-file", "", "the `file` that holds the token required of every request (default $"+serveTokenEnv+"; none: no token)")
	fs.StringVar(&f.durability, "durability", ratestore.Sync.String(), "the durability `mode`: sync, each decision that takes something on disk before its reply (the default), or async, written every 100ms")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", defaultShutdown, "how long requests in flight may take to finish when stopped (default 30s)")
	fs.StringVar(&f.redisURL, "redis", "", "keep the limiters' states in the Redis at this `URL` (redis://host:port/db, rediss://, a cluster as redis://host1:port?addr=host2:port), shared with other serve processes, instead of the database")
	fs.BoolVar(&f.redisClock, "redis-clock", false, "with --redis, decide on Redis's clock (an offset from TIME measured every 30s) rather than this machine's")
	return f
}

// runServe is the serve command: it checks the flags and reads the token,
// opens the store, listens on the sides that are on, and serves until
// stopped. A start that fails before serving closes the store and leaves
// no database behind that it alone made.
func (c *cli) runServe(f *serveFlags) error {
	const cmd = "serve"
	dur, token, err := f.validate(cmd)
	if err != nil {
		return err
	}
	log := c.logger()
	out := serveOut{Token: token != ""}
	st, err := c.openStore(cmd, f.redisURL, f.redisClock, dur, log)
	if err != nil {
		return err
	}
	out.Redis, out.Durability = st.redis, st.durability
	httpLn, respLn, err := listenSides(f.httpAddr, f.respAddr)
	if err != nil {
		st.abandon()
		return err
	}
	if httpLn != nil {
		out.HTTP = httpLn.Addr().String()
	}
	if respLn != nil {
		out.RESP = respLn.Addr().String()
	}
	return c.runServer(st.server(server.Options{Token: token, Logger: log}), st.close, httpLn, respLn, log, f.shutdown, out)
}

// validate checks the serve command's flags, and returns the durability
// asked for and the token required of requests ("" for none). Listening
// beyond loopback without a token is refused.
func (f *serveFlags) validate(cmd string) (dur ratestore.Durability, token string, err error) {
	if f.httpAddr == "" && f.respAddr == "" {
		return 0, "", usagef(cmd, "%s: --http and --resp are both off: nothing to serve", cmd)
	}
	if f.shutdown <= 0 {
		return 0, "", usagef(cmd, "%s: --shutdown-timeout %v: want a positive duration", cmd, f.shutdown)
	}
	if dur, err = parseDurability(cmd, f.durability); err != nil {
		return 0, "", err
	}
	if token, err = tokenFrom("--token-file", f.tokenFile, serveTokenEnv); err != nil {
		return 0, "", fmt.Errorf("%s: %w", cmd, err)
	}
	for _, a := range []struct{ flag, addr string }{{"--http", f.httpAddr}, {"--resp", f.respAddr}} {
		if a.addr == "" || token != "" {
			continue
		}
		host, _, err := net.SplitHostPort(a.addr)
		if err != nil {
			return 0, "", usagef(cmd, "%s: %s %q: %v", cmd, a.flag, a.addr, err)
		}
		if !loopback(host) {
			return 0, "", usagef(cmd, "%s: %s %s listens beyond loopback: a token is required (--token-file or $%s)", cmd, a.flag, a.addr, serveTokenEnv)
		}
	}
	return dur, token, nil
}

// listenSides listens on the addresses of the HTTP and RESP sides; a side
// whose address is "" is off, and its listener nil. If either fails, the
// other is closed.
func listenSides(httpAddr, respAddr string) (httpLn, respLn net.Listener, err error) {
	listen := func(addr string) (net.Listener, error) {
		if addr == "" {
			return nil, nil
		}
		return net.Listen("tcp", addr)
	}
	httpLn, err = listen(httpAddr)
	if err == nil {
		respLn, err = listen(respAddr)
	}
	if err != nil {
		if httpLn != nil {
			httpLn.Close()
		}
		return nil, nil, err
	}
	return httpLn, respLn, nil
}

// redact is a Redis URL without its password, for output.
func redact(addr string) string {
	u, err := url.Parse(addr)
	if err != nil {
		return "(an invalid URL)"
	}
	return u.Redacted()
}

// runServer serves s until the command's context ends or SIGINT or
// SIGTERM arrives, then stops both sides, lets HTTP requests in flight
// finish for up to timeout, and closes the store with closeDB.
func (c *cli) runServer(s *server.Server, closeDB func() error, httpLn, respLn net.Listener, log *slog.Logger, timeout time.Duration, out serveOut) error {
	ctx, stop := signal.NotifyContext(c.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	errs := make(chan error, 2)
	var srv *http.Server
	if httpLn != nil {
		srv = &http.Server{
			Handler:           s.Handler(),
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		go func() {
			if err := srv.Serve(httpLn); !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serve: http: %w", err)
			}
		}()
	}
	if respLn != nil {
		go func() {
			if err := s.ServeRESP(respLn); err != nil {
				errs <- fmt.Errorf("serve: resp: %w", err)
			}
		}()
	}
	log.Info("serve: listening", "http", out.HTTP, "resp", out.RESP, "durability", out.Durability, "redis", out.Redis, "token", out.Token)
	err := c.emit(out, func(w io.Writer) {
		if out.HTTP != "" {
			fmt.Fprintf(w, "serving HTTP on http://%s/v1/allow\n", out.HTTP)
		}
		if out.RESP != "" {
			fmt.Fprintf(w, "serving RESP (CL.THROTTLE) on %s\n", out.RESP)
		}
	})
	select {
	case <-ctx.Done():
	case serr := <-errs:
		err = errors.Join(err, serr)
	}
	log.Info("serve: shutting down", "timeout", timeout)
	if srv != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		if serr := srv.Shutdown(sctx); serr != nil {
			srv.Close()
		}
		cancel()
	}
	s.Close()
	if cerr := closeDB(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	log.Info("serve: stopped")
	return err
}
