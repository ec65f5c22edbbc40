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
	"github.com/ratestore/ratestore/redisstore"
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

func serveCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	httpAddr := fs.String("http", defaultServeHTTP, "the `address` of the HTTP API (\"\": none)")
	respAddr := fs.String("resp", defaultServeRESP, "the `address` of the RESP listener (\"\": none)")
	tokenFile := fs.String("token-file", "", "the `file` that holds the token required of every request (default $"+serveTokenEnv+"; none: no token)")
	durability := fs.String("durability", ratestore.Sync.String(), "the durability `mode`: sync, each decision that takes something on disk before its reply (the default), or async, written every 100ms")
	shutdown := fs.Duration("shutdown-timeout", defaultShutdown, "how long requests in flight may take to finish when stopped (default 30s)")
	redisURL := fs.String("redis", "", "keep the limiters' states in the Redis at this `URL` (redis://host:port/db, rediss://, a cluster as redis://host1:port?addr=host2:port), shared with other serve processes, instead of the database")
	return func([]string) error {
		const cmd = "serve"
		if *httpAddr == "" && *respAddr == "" {
			return usagef(cmd, "%s: --http and --resp are both off: nothing to serve", cmd)
		}
		if *shutdown <= 0 {
			return usagef(cmd, "%s: --shutdown-timeout %v: want a positive duration", cmd, *shutdown)
		}
		dur, err := parseDurability(cmd, *durability)
		if err != nil {
			return err
		}
		token, err := tokenFrom("--token-file", *tokenFile, serveTokenEnv)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
		for _, a := range []struct{ flag, addr string }{{"--http", *httpAddr}, {"--resp", *respAddr}} {
			if a.addr == "" || token != "" {
				continue
			}
			host, _, err := net.SplitHostPort(a.addr)
			if err != nil {
				return usagef(cmd, "%s: %s %q: %v", cmd, a.flag, a.addr, err)
			}
			if !loopback(host) {
				return usagef(cmd, "%s: %s %s listens beyond loopback: a token is required (--token-file or $%s)", cmd, a.flag, a.addr, serveTokenEnv)
			}
		}

		var h slog.Handler = slog.NewTextHandler(c.stderr, nil)
		if c.json {
			h = slog.NewJSONHandler(c.stderr, nil)
		}
		log := slog.New(h)
		out := serveOut{Token: token != ""}
		var (
			limiters server.Limiters
			closeDB  func() error
			created  []string
		)
		if *redisURL != "" {
			rdb, err := redisstore.Open(c.ctx, *redisURL, redisstore.Options{Now: c.now, Logger: log})
			if err != nil {
				return fmt.Errorf("%s: %w", cmd, err)
			}
			limiters, closeDB, out.Redis = server.Adapt(rdb.Limiter), rdb.Close, redact(*redisURL)
		} else {
			db, made, err := c.openServing(dur, log)
			if err != nil {
				return err
			}
			limiters, closeDB, created, out.Durability = server.Adapt(db.Limiter), db.Close, made, dur.String()
		}
		var httpLn, respLn net.Listener
		listen := func(addr string) (net.Listener, error) {
			if addr == "" {
				return nil, nil
			}
			return net.Listen("tcp", addr)
		}
		httpLn, err = listen(*httpAddr)
		if err == nil {
			respLn, err = listen(*respAddr)
		}
		if err != nil {
			if httpLn != nil {
				httpLn.Close()
			}
			if cerr := closeDB(); cerr == nil {
				removeAll(created)
			}
			return err
		}
		if httpLn != nil {
			out.HTTP = httpLn.Addr().String()
		}
		if respLn != nil {
			out.RESP = respLn.Addr().String()
		}
		return c.runServer(server.New(limiters, server.Options{Token: token, Logger: log}), closeDB, httpLn, respLn, log, *shutdown, out)
	}
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
