// The serving commands (gateway, console, serve): the store they serve
// from, chosen by their flags, and the server that serves until a signal.

package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/console"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/keystore"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/redisstore"
	"github.com/ratestore/ratestore/server"
)

// openServing opens the database of the global flags for a server, with
// the durability asked for and its failures logged, and returns the paths
// it created, if it did: a gateway starts on an empty database, whose keys
// are then created through its admin API.
func (c *cli) openServing(d ratestore.Durability, log *slog.Logger) (db *ratestore.DB, created []string, err error) {
	have, err := exists(c.db)
	if err != nil {
		return nil, nil, err
	}
	if !have {
		created = missing(dbFiles(c.db)...)
	}
	backend, _ := backendNamed(c.backend) // checked by main
	db, err = ratestore.Open(c.db, ratestore.Options{Backend: backend, Durability: d, Now: c.now, Logger: log, Recover: c.recover})
	if err != nil {
		removeAll(created)
		return nil, nil, c.openError(c.db, err)
	}
	return db, created, nil // the logger has the recovery report, if any
}

// servingStore is the store a serving command (gateway, serve) serves
// from, the database of the global flags or a Redis with --redis, as the
// gateway and server it makes: both are written once against the backend
// contract (backend.Store), so nothing after openStore asks which it is.
type servingStore struct {
	gateway    func(gateway.Options) (*gateway.Gateway, error)
	operator   func() (*keystore.Store, *ledger.Ledger, error) // the keys, and the ledger read only
	audit      func(audit.Options) (*audit.Log, error)
	server     func(server.Options) *server.Server
	sessions   *console.Sessions // the console's sessions, kept in the store
	close      func() error
	created    []string // the paths opening the database created
	redis      string   // where it is, for the start line: the Redis URL, redacted
	durability string   // or the database's durability
}

// serving returns the servingStore of db.
func serving(db backend.Store) *servingStore {
	return &servingStore{
		gateway: func(o gateway.Options) (*gateway.Gateway, error) { return gateway.New(db, o) },
		operator: func() (*keystore.Store, *ledger.Ledger, error) {
			ks, err := keystore.Open(db, keystore.Options{})
			if err != nil {
				return nil, nil, err
			}
			l, err := ledger.Open(db, ledger.Options{ReadOnly: true})
			return ks, l, err
		},
		audit:    func(o audit.Options) (*audit.Log, error) { return audit.Open(db, o) },
		server:   func(o server.Options) *server.Server { return server.New(db, o) },
		sessions: console.StoreSessions(db),
		close:    db.Close,
	}
}

// openStore opens the store of a serving command: the Redis at redisURL
// if it is not "", else the database of the global flags (see
// openServing), with durability d; redisClock decides on Redis's clock
// (redisstore.Options.RedisClock). It is where the command's flags choose
// the backend.
func (c *cli) openStore(cmd, redisURL string, redisClock bool, d ratestore.Durability, log *slog.Logger) (*servingStore, error) {
	if redisClock && redisURL == "" {
		return nil, usagef(cmd, "%s: --redis-clock needs --redis", cmd)
	}
	if redisURL != "" {
		rdb, err := redisstore.Open(c.ctx, redisURL, redisstore.Options{Now: c.now, Logger: log, RedisClock: redisClock})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cmd, err)
		}
		st := serving(rdb)
		st.redis = redact(redisURL)
		return st, nil
	}
	db, created, err := c.openServing(d, log)
	if err != nil {
		return nil, err
	}
	st := serving(db)
	st.created, st.durability = created, d.String()
	return st, nil
}

// abandon closes the store of a start that failed before serving and, if
// that worked, removes the paths opening it created: nothing was served,
// so no database is left behind that a failed start alone made.
func (s *servingStore) abandon() {
	if cerr := s.close(); cerr == nil {
		removeAll(s.created)
	}
}

// logger is the log of a serving command: text lines on stderr, or JSON
// lines with --json.
func (c *cli) logger() *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(c.stderr, nil)
	if c.json {
		h = slog.NewJSONHandler(c.stderr, nil)
	}
	return slog.New(h)
}

// serve serves g on ln until the command's context ends or SIGINT or
// SIGTERM arrives, lets the requests in flight finish for up to timeout,
// cuts those that do not, waits for every request to have recorded its
// usage, and closes the store with closeDB. announce logs and prints that
// it listens, once it does.
func (c *cli) serve(ln net.Listener, h http.Handler, g *gateway.Gateway, reload reloadFunc, closeDB func() error, log *slog.Logger, timeout time.Duration, announce func() error) error {
	ctx, stop := signal.NotifyContext(c.ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if reload != nil {
		defer reloadOnHangup(ctx, reload, log)()
	}

	err := announce()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	stopGateway(ctx, srv, g, log, timeout)
	if g != nil {
		closeLedger(ctx, g, log)
	}
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	err = errors.Join(serveErr, err)
	if cerr := closeDB(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	log.Info("gateway: stopped")
	return err
}

// reloadOnHangup calls reload on every SIGHUP until the returned function
// is called: a configuration that does not parse is logged and the
// running one stays.
func reloadOnHangup(ctx context.Context, reload reloadFunc, log *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-hup:
				if ups, models, err := reload(); err != nil {
					log.Error("gateway: not reloaded: the running configuration stays", "error", err.Error())
				} else {
					log.Info("gateway: reloaded", "upstreams", ups, "models", models)
				}
			case <-done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// closeLedger closes g's spend ledger, which compacts what it wrote, once
// every request has recorded its usage and before the database closes. A
// ledger that cannot finish within closeGrace loses nothing: its entries
// stay readable, uncompacted.
func closeLedger(ctx context.Context, g *gateway.Gateway, log *slog.Logger) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
	defer cancel()
	if err := g.Close(cctx); err != nil {
		log.Warn("gateway: closing the spend ledger failed: its last entries stay readable, uncompacted", "error", err.Error())
	}
}

// stopGateway stops srv, which serves g (nil: none, the console alone):
// it lets the requests in flight finish for up to timeout, then cuts
// those still running, and waits up to closeGrace for every request to
// have recorded its usage.
func stopGateway(ctx context.Context, srv *http.Server, g *gateway.Gateway, log *slog.Logger, timeout time.Duration) {
	log.Info("gateway: shutting down", "timeout", timeout)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("gateway: requests still in flight at the shutdown timeout: closing them", "error", serr.Error())
		srv.Close()
		if g != nil {
			g.Abort()
		}
	}
	cancel()
	if g == nil {
		return
	}
	// Shutdown waits for the connections, not for the handlers: those of
	// the requests just cut still record their usage, which must not go
	// to a closed database.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeGrace)
	if werr := g.Wait(wctx); werr != nil {
		log.Error("gateway: requests still recording their usage at close: it may be lost", "wait", closeGrace)
	}
	cancel()
}
