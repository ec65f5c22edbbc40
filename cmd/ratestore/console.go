package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/audit"
)

// defaultConsoleListen is where the console command listens: loopback,
// next to the serve command's port.
const defaultConsoleListen = "127.0.0.1:8090"

// consoleHelp is the help text of the console command.
const consoleHelp = `Serves the operator's console (the web page a gateway serves at /admin/) on a
database that no gateway holds, read-only: its keys, teams, spend and
requests, to look at, with no gateway running and nothing written. Open the
address it prints in a browser and sign in with the admin token, from
$` + adminTokenEnv + ` or --admin-token-file (any token of your choice: it only
guards this console). Every change is refused (403 read_only) and the page
shows no buttons for them; the admin API's GET routes answer as a gateway's
do (GET /admin/keys with "Authorization: Bearer TOKEN").

The database is opened read-only (bbolt's and badger's read-only modes): its
files are not written at all, and other read-only opens may share it. It must
be closed: a running gateway holds it, and has a console of its own at /admin/
(with changes). A badger directory left by a crash must be opened writable once
(any command) before the console can read it. With --redis URL it reads the key store and
ledger of the gateways started with --redis URL instead, while they run.

The admin token must be 32 bytes at least (make one with: openssl rand -hex
32). Sessions are kept in memory, so that nothing is written: a restart
signs out. Sign-in, the slow-down of wrong tokens, --trusted-proxy and
--secure-cookie are as the gateway's (see ratestore help gateway).

It listens on ` + defaultConsoleListen + ` unless told otherwise: loopback only.
--tls-cert and --tls-key serve it over TLS; beyond loopback without them, a
warning is logged. SIGINT or SIGTERM stops it.`

// consoleFlags are the values of the console command's flags.
type consoleFlags struct {
	listen         string
	redisURL       string
	adminTokenFile string
	tlsCert        string
	tlsKey         string
	access         accessFlags
}

// consoleOut is what the console command prints once it listens.
type consoleOut struct {
	Listen   string `json:"listen"`
	URL      string `json:"url"` // the console's page
	TLS      bool   `json:"tls"`
	ReadOnly bool   `json:"read_only"`       // always: the console command changes nothing
	Redis    string `json:"redis,omitempty"` // the Redis, its password redacted, with --redis
}

func (out consoleOut) text(w io.Writer) {
	fmt.Fprintf(w, "console (read-only) at %s: sign in with the admin token\n", out.URL)
}

// consoleCmd registers the console command's flags on fs and returns the
// command.
func consoleCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	f := &consoleFlags{}
	fs.StringVar(&f.listen, "listen", defaultConsoleListen, "the `address` to serve on (default "+defaultConsoleListen+")")
	fs.StringVar(&f.redisURL, "redis", "", "read the key store and ledger in the Redis at this `URL` (that of gateways started with --redis) instead of the database")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "the `file` that holds the admin token to sign in with (default $"+adminTokenEnv+"); required")
	tlsFlagSet(fs, &f.tlsCert, &f.tlsKey)
	accessFlagSet(fs, &f.access)
	return func([]string) error { return c.runConsole(f) }
}

// runConsole is the console command: a gateway that serves its admin API
// and console alone, read-only, on the database of the global flags (or
// the Redis of --redis), until stopped.
// signInToken returns the admin token the console's sign-in asks for,
// from file or $RATESTORE_ADMIN_TOKEN: the console needs one.
func signInToken(cmd, file string) (string, error) {
	token, err := adminToken(file)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", cmd, err)
	case token == "":
		return "", usagef(cmd, "%s: no admin token: set $%s or give --admin-token-file; the console's sign-in asks for it", cmd, adminTokenEnv)
	}
	return token, checkAdminToken(cmd, file, token)
}

func (c *cli) runConsole(f *consoleFlags) error {
	const cmd = "console"
	tlsConfig, err := loadTLS(cmd, f.tlsCert, f.tlsKey)
	if err != nil {
		return err
	}
	token, err := signInToken(cmd, f.adminTokenFile)
	if err != nil {
		return err
	}
	log := c.logger()
	st, err := c.consoleStore(cmd, f.redisURL, log)
	if err != nil {
		return err
	}
	keys, l, err := st.operator()
	var alog *audit.Log
	if err == nil {
		alog, err = st.audit(audit.Options{ReadOnly: true, Log: log})
	}
	var h http.Handler
	if err == nil {
		// Sessions in memory: the console writes nothing.
		h, err = operatorSurface(consoleConfig{token: token, readOnly: true, log: log, now: c.now, access: f.access, audit: alog}, keys, l, nil)
	}
	var ln net.Listener
	if err == nil {
		ln, err = listen(f.listen, tlsConfig)
	}
	if err != nil {
		if l != nil {
			l.Close(c.ctx)
		}
		closeAudit(alog)
		st.close()
		return fmt.Errorf("%s: %w", cmd, err)
	}
	closeAll := func() error {
		l.Close(c.ctx)
		closeAudit(alog)
		return st.close()
	}
	out := consoleOut{Listen: ln.Addr().String(), TLS: tlsConfig != nil, ReadOnly: true, Redis: st.redis}
	out.URL = "http://" + out.Listen + "/admin/"
	if out.TLS {
		out.URL = "https://" + out.Listen + "/admin/"
	}
	return c.serve(ln, h, nil, nil, closeAll, log, defaultShutdown, func() error {
		if beyondLoopback(ln) && !out.TLS {
			warnClearText(log, cmd, out.Listen)
		}
		log.Info("console: listening, read-only", "listen", out.Listen, "url", out.URL, "redis", out.Redis, "db", c.db)
		return c.emit(out, out.text)
	})
}

// consoleStore opens the store the console command reads: the Redis at
// redisURL if it is not "", else the database of the global flags, which
// must exist and be closed. A database in use is refused with what to do
// instead.
func (c *cli) consoleStore(cmd, redisURL string, log *slog.Logger) (*servingStore, error) {
	if redisURL != "" {
		return c.openStore(cmd, redisURL, false, ratestore.Sync, log)
	}
	backend, _ := backendNamed(c.backend) // checked by main
	db, err := c.openAs(c.db, backend, false, true)
	switch {
	case errors.Is(err, ratestore.ErrLocked):
		return nil, fmt.Errorf("%s: %s is in use: a running gateway (or another command) holds it, and the console reads a closed database only; open the running gateway's own console at http://ITS-ADDRESS/admin/ instead: %w", cmd, c.db, ratestore.ErrLocked)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return serving(db), nil
}

// tlsFlagSet registers --tls-cert and --tls-key on fs.
func tlsFlagSet(fs *flag.FlagSet, cert, key *string) {
	fs.StringVar(cert, "tls-cert", "", "serve over TLS with the certificate (chain) in this PEM `file`; with --tls-key")
	fs.StringVar(key, "tls-key", "", "the private key of --tls-cert, a PEM `file`")
}

// loadTLS returns the TLS configuration of --tls-cert and --tls-key, or
// nil when neither is given. It reads them at start, so that a wrong file
// fails the command rather than every connection.
func loadTLS(cmd, cert, key string) (*tls.Config, error) {
	switch {
	case cert == "" && key == "":
		return nil, nil
	case cert == "" || key == "":
		return nil, usagef(cmd, "%s: --tls-cert and --tls-key go together: give both or neither", cmd)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("%s: --tls-cert %s, --tls-key %s: %w", cmd, cert, key, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}, nil
}

// listen listens on addr, over TLS with config unless it is nil.
func listen(addr string, config *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil || config == nil {
		return ln, err
	}
	return tls.NewListener(ln, config), nil
}

// beyondLoopback reports whether ln listens on an address other hosts can
// reach.
func beyondLoopback(ln net.Listener) bool {
	a, ok := ln.Addr().(*net.TCPAddr)
	return ok && !a.IP.IsLoopback()
}

// warnClearText logs that the admin API and console of cmd, listening on
// listen beyond loopback, go over the network in clear text.
func warnClearText(log *slog.Logger, cmd, listen string) {
	log.Warn(cmd+": the admin API is reachable beyond loopback in clear text, and so is the console: anyone on the network who sees the admin token or a session cookie can read or change the keys; give --tls-cert and --tls-key, or listen on loopback behind a TLS proxy",
		"listen", listen)
}
