package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/alert"
	"github.com/ratestore/ratestore/audit"
	"github.com/ratestore/ratestore/gateway"
	"github.com/ratestore/ratestore/ledger"
	"github.com/ratestore/ratestore/ledger/export"
	"github.com/ratestore/ratestore/pricing"
)

// The gateway command's defaults.
const (
	defaultListen   = "127.0.0.1:8080" // loopback: reachable from this host only
	upstreamKeyEnv  = "RATESTORE_UPSTREAM_KEY"
	defaultShutdown = 30 * time.Second
	// closeGrace bounds the wait, after the shutdown timeout has cut the
	// requests still in flight, for them to record their usage before the
	// database is closed: they only write it.
	closeGrace = 10 * time.Second
	// defaultExportMaxBytes and exportKeep are the size at which the
	// --ledger-export file is rotated, and the rotated files kept.
	defaultExportMaxBytes = 100 << 20
	exportKeep            = 5
	// maxRetentionDays bounds --ledger-retention: a century, far below
	// the largest time.Duration.
	maxRetentionDays = 36500
)

// gatewayOut is what the gateway command prints once it listens.
type gatewayOut struct {
	Listen     string     `json:"listen"`
	Upstream   string     `json:"upstream"`  // the default route's; "" when there is none
	Routes     []routeOut `json:"routes"`    // the routes by path prefix, as given
	Pools      []poolOut  `json:"upstreams"` // the upstreams of --config, in order
	StatsPath  string     `json:"stats_path"`
	RPS        float64    `json:"rps"`
	Burst      int64      `json:"burst"`
	Durability string     `json:"durability"`      // "" with --redis
	Redis      string     `json:"redis,omitempty"` // the Redis, its password redacted, with --redis
	Shadow     bool       `json:"shadow"`
	Admin      bool       `json:"admin"`  // an admin token is set: the admin API and /metrics answer
	Prices     string     `json:"prices"` // --prices, over the built-in table; "" for none
	Unpriced   string     `json:"unpriced"`
	TLS        bool       `json:"tls"` // served over TLS (--tls-cert, --tls-key)
}

// poolOut is an upstream of gatewayOut's pools.
type poolOut struct {
	Name   string   `json:"name"`
	API    string   `json:"api"`
	URL    string   `json:"url"` // redacted
	Models []string `json:"models"`
}

// routeOut is a route of gatewayOut.
type routeOut struct {
	Prefix   string `json:"prefix"`
	Upstream string `json:"upstream"` // redacted
	KeyEnv   string `json:"key_env"`  // the variable its credential came from; "" for none
}

// perRoute is the values of a repeatable per-route flag: PREFIX=VALUE for
// the route of PREFIX (a path, so it starts with "/"), a bare VALUE for the
// default route (key ""), in the order given.
type perRoute struct {
	flag     string
	prefixes []string
	values   map[string]string
}

func newPerRoute(flag string) *perRoute { return &perRoute{flag: flag, values: map[string]string{}} }

func (p *perRoute) set(v string) error {
	prefix, value := "", v
	if strings.HasPrefix(v, "/") {
		var ok bool
		if prefix, value, ok = strings.Cut(v, "="); !ok {
			return fmt.Errorf("%q: want PREFIX=VALUE, PREFIX a path", v)
		}
	}
	if value == "" {
		return fmt.Errorf("%q: empty value", v)
	}
	if _, dup := p.values[prefix]; dup {
		if prefix == "" {
			return fmt.Errorf("%q: the default route's is given already", v)
		}
		return fmt.Errorf("%q: the route %s's is given already", v, prefix)
	}
	p.prefixes = append(p.prefixes, prefix)
	p.values[prefix] = value
	return nil
}

// gatewayCmd registers the gateway command's flags on fs and returns the
// command, which runs once fs has parsed them.
func gatewayCmd(c *cli, fs *flag.FlagSet) func([]string) error {
	f := gatewayFlagSet(fs)
	return func([]string) error {
		ups, err := applyConfig("gateway", fs, f.config)
		if err != nil {
			return err
		}
		f.pools = ups
		return c.runGateway(f)
	}
}

// gatewayFlags are the values of the gateway command's flags.
type gatewayFlags struct {
	config         string             // --config
	pools          []gateway.Upstream // the upstreams of --config
	attempts       int                // --upstream-attempts
	queue          time.Duration      // --upstream-queue-timeout
	listen         string
	upstreams      *perRoute // --upstream, by route
	upstreamKey    string
	keyEnvs        *perRoute // --upstream-key-env, by route
	keyHeaders     *perRoute // --upstream-key-header, by route
	shadow         bool
	adminTokenFile string
	rps            float64
	burst          int64
	statsPath      string
	durability     string
	shutdown       time.Duration
	maxTokens      int64 // --default-max-tokens
	maxBody        int64 // --max-request-body
	connect        time.Duration
	firstByte      time.Duration
	drain          time.Duration
	weights        *gateway.Weights // nil: every token counts 1
	redisURL       string
	redisClock     bool
	bodyTimeout    time.Duration
	maxCharge      int64 // --max-tokens-per-request
	idle           time.Duration
	prices         string        // --prices
	unpriced       string        // --unpriced
	defaultPrice   string        // --default-price-file
	retention      time.Duration // --ledger-retention
	retentionSet   bool          // --ledger-retention was given
	export         string        // --ledger-export
	exportMaxBytes int64         // --ledger-export-max-bytes
	noLedger       bool          // --no-ledger
	alertWebhook   string        // --alert-webhook
	alertLevels    []float64     // --alert-thresholds
	tlsCert        string        // --tls-cert
	tlsKey         string        // --tls-key
	auditRetention time.Duration // --audit-retention
	access         accessFlags   // --trusted-proxy, --secure-cookie
}

// gatewayFlagSet registers the gateway command's flags on fs and returns
// where their values go once fs has parsed them.
func gatewayFlagSet(fs *flag.FlagSet) *gatewayFlags {
	f := &gatewayFlags{
		upstreams:  newPerRoute("--upstream"),
		keyEnvs:    newPerRoute("--upstream-key-env"),
		keyHeaders: newPerRoute("--upstream-key-header"),
	}
	configFlag(fs, &f.config)
	fs.StringVar(&f.listen, "listen", defaultListen, "the `address` to serve on (default "+defaultListen+")")
	fs.Func("upstream", "the `URL` of the model API to forward to: a bare URL is the default route, PREFIX=URL (/v1/messages=https://api.anthropic.com) routes the paths under PREFIX; repeatable (one at least)", f.upstreams.set)
	fs.StringVar(&f.upstreamKey, "upstream-key", "", "the `key` sent to the default route's upstream (default $"+upstreamKeyEnv+")")
	fs.Func("upstream-key-env", "PREFIX=`VAR`: the environment variable that holds the credential of the route of PREFIX (a bare VAR: the default route's, default "+upstreamKeyEnv+"); repeatable", f.keyEnvs.set)
	fs.Func("upstream-key-header", "PREFIX=`FIELD`: the field the credential of the route of PREFIX goes in (a bare FIELD: the default route's): Authorization, as a bearer token (the default), or any other (x-api-key), as it is; repeatable", f.keyHeaders.set)
	fs.BoolVar(&f.shadow, "shadow", false, "shadow mode: serve the requests that a key's limits or models would refuse, logging them at warn, to roll limits out safely")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "the `file` that holds the admin token (default $"+adminTokenEnv+"); without one, /admin/ and /metrics answer 404")
	fs.Float64Var(&f.rps, "rps", 0, "each key's request `rate` per second (0: no limit)")
	fs.Int64Var(&f.burst, "burst", 0, "each key's burst of `requests`; 0: the rate rounded up")
	fs.StringVar(&f.statsPath, "stats-path", gateway.DefaultStatsPath, "the `path` that shows callers their own usage (default "+gateway.DefaultStatsPath+")")
	fs.StringVar(&f.durability, "durability", ratestore.Sync.String(), "the durability `mode`: sync, usage on disk as each request ends (the default), or async, written every 100ms (a crash loses the last)")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", defaultShutdown, "how long requests in flight may take to finish when stopped (default 30s)")
	fs.Int64Var(&f.maxTokens, "default-max-tokens", gateway.DefaultMaxTokens, "the output `tokens` reserved for a model call that names no max_tokens (default 4096)")
	fs.Int64Var(&f.maxBody, "max-request-body", gateway.DefaultMaxRequestBody, "the largest request body, in `bytes`; larger ones get 413 (default 32 MiB)")
	fs.DurationVar(&f.connect, "connect-timeout", gateway.DefaultConnectTimeout, "how long connecting to the upstream may take (default 10s; 0: no bound)")
	fs.DurationVar(&f.firstByte, "first-byte-timeout", gateway.DefaultFirstByteTimeout, "how long the upstream may take to send its response header, after which the caller gets 504 (default 10m: a non-streamed response's header comes after the whole generation; 0: no bound)")
	fs.DurationVar(&f.drain, "drain-timeout", gateway.DefaultDrainTimeout, "after a caller hangs up, how long the gateway goes on reading a model call's response for the usage at its end (the upstream generates, and bills, all the same); then the estimate is charged (default 5m; 0: at once)")
	fs.Func("weights", "`TYPE=W,...`: what a token of each type counts for in a key's windows, of input (uncached), output (reasoning included), cache_read, cache_write; a type left out counts 1 (default: every token 1)", func(v string) (err error) {
		f.weights, err = parseWeights(v)
		return err
	})
	fs.StringVar(&f.redisURL, "redis", "", "keep the keys and their usage in the Redis at this `URL` (redis://host:port/db, rediss://, a cluster as redis://host1:port?addr=host2:port), shared with the other gateways that use it, instead of the database")
	fs.BoolVar(&f.redisClock, "redis-clock", false, "with --redis, decide on Redis's clock (an offset from TIME measured every 30s) rather than this machine's: for gateways on machines whose clocks may differ")
	fs.DurationVar(&f.bodyTimeout, "body-timeout", gateway.DefaultBodyTimeout, "how long a caller may take to send a request body, after its header; slower ones get 408 (default 30s; 0: no bound)")
	fs.Int64Var(&f.maxCharge, "max-tokens-per-request", gateway.DefaultMaxTokensPerRequest, "the most `tokens` one response may be charged: an upstream that reports more is charged this, logged at error (default 10000000)")
	fs.DurationVar(&f.idle, "idle-timeout", gateway.DefaultIdleTimeout, "how long the upstream may leave a response body silent between reads; a stream silent longer is ended (default 1m; 0: no bound)")
	fs.StringVar(&f.prices, "prices", "", "a price `file` in LiteLLM's format (model_prices_and_context_window.json) over the built-in table; SIGHUP and POST /admin/prices/reload read it again")
	fs.IntVar(&f.attempts, "upstream-attempts", gateway.DefaultUpstreamAttempts, "the most upstreams of a pool one request is sent to when they answer 429 or 5xx or cannot be reached (default 3; 1: no failover)")
	fs.DurationVar(&f.queue, "upstream-queue-timeout", gateway.DefaultUpstreamQueueTimeout, "how long a request waits for an upstream of its pool with room in its limits before 429 upstream_capacity (default 30s; 0: no wait)")
	fs.StringVar(&f.unpriced, "unpriced", "refuse", "what a model with no price costs a key with a budget: refuse (403), zero ($0, logged), or default (--default-price-file)")
	fs.StringVar(&f.defaultPrice, "default-price-file", "", "a price `file` in LiteLLM's format with one entry: the price of unpriced models with --unpriced default")
	tlsFlagSet(fs, &f.tlsCert, &f.tlsKey)
	accessFlagSet(fs, &f.access)
	ledgerFlagSet(fs, f)
	auditRetentionFlag(fs, &f.auditRetention)
	return f
}

// ledgerFlagSet registers the spend ledger's flags on fs.
func ledgerFlagSet(fs *flag.FlagSet, f *gatewayFlags) {
	f.retention = ledger.DefaultRetention
	fs.Func("ledger-retention", "how long the spend ledger keeps each request's entry: a Go `duration` (2160h) or days (90d), rounded up to whole days; the daily totals are kept for good (default 90d)", func(v string) (err error) {
		f.retention, err = parseRetention(v)
		f.retentionSet = true
		return err
	})
	fs.StringVar(&f.export, "ledger-export", "", "also write each request's ledger entry to `FILE` as a JSON line (GET /admin/requests's shape), rotated at --ledger-export-max-bytes, keeping 5 old files")
	fs.Int64Var(&f.exportMaxBytes, "ledger-export-max-bytes", defaultExportMaxBytes, "rotate the --ledger-export file when the next line would take it past this many `bytes` (default 100 MiB)")
	fs.BoolVar(&f.noLedger, "no-ledger", false, "keep no spend ledger: /admin/spend and /admin/requests answer 404")
	fs.StringVar(&f.alertWebhook, "alert-webhook", "", "POST an alert as JSON to `URL` when a key's or team's usage crosses a threshold of a token window or budget, once per crossing")
	fs.Func("alert-thresholds", "the alerts' `thresholds`, fractions of each limit, comma-separated (default 0.8,1)", func(v string) error {
		f.alertLevels = nil
		for _, s := range strings.Split(v, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return fmt.Errorf("%q: want a number such as 0.8", s)
			}
			f.alertLevels = append(f.alertLevels, x)
		}
		return nil
	})
}

// openAlerts starts the alert notifier of --alert-webhook, if one is
// given (nil otherwise), and returns the function that delivers what it
// has queued, for a while, and stops it.
func (f *gatewayFlags) openAlerts(cmd string, log *slog.Logger) (*alert.Notifier, func(), error) {
	if f.alertWebhook == "" {
		if f.alertLevels != nil {
			return nil, nil, usagef(cmd, "%s: --alert-thresholds needs --alert-webhook", cmd)
		}
		return nil, func() {}, nil
	}
	n, err := alert.New(alert.Options{URL: f.alertWebhook, Thresholds: f.alertLevels, Log: log})
	if err != nil {
		return nil, nil, usagef(cmd, "%s: --alert-webhook: %v", cmd, err)
	}
	return n, func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		if err := n.Close(ctx); err != nil {
			log.Warn("gateway: alerts not delivered at shutdown", "error", err.Error())
		}
	}, nil
}

// parseRetention parses --ledger-retention: a positive Go duration
// (2160h), or a whole number of days (90d), which time.ParseDuration does
// not take.
func parseRetention(v string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days <= 0 || days > maxRetentionDays {
			return 0, fmt.Errorf("%q: want a whole number of days from 1 to %d (90d), or a Go duration (2160h)", v, maxRetentionDays)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 || d > maxRetentionDays*24*time.Hour {
		return 0, fmt.Errorf("%q: want a positive Go duration (2160h) or a number of days (90d)", v)
	}
	return d, nil
}

// validateLedger checks the spend ledger's flags.
func (f *gatewayFlags) validateLedger(cmd string) error {
	switch {
	case f.noLedger && (f.export != "" || f.retentionSet):
		return usagef(cmd, "%s: --no-ledger keeps no ledger: --ledger-export and --ledger-retention need one", cmd)
	case f.exportMaxBytes <= 0:
		return usagef(cmd, "%s: --ledger-export-max-bytes %d: want a positive number of bytes", cmd, f.exportMaxBytes)
	}
	return nil
}

// openExport opens the --ledger-export file, if one is given (nil
// otherwise), and returns what closes it: it writes the entries queued,
// then logs what became of them all. created is the file, if opening it
// created it, for a start that fails to remove.
func (f *gatewayFlags) openExport(cmd string, log *slog.Logger) (x ledger.Exporter, closeExport func(), created []string, err error) {
	if f.export == "" {
		return nil, func() {}, nil, nil
	}
	created = missing(f.export)
	file, err := export.Open(f.export, f.exportMaxBytes, exportKeep, log)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: --ledger-export: %w", cmd, err)
	}
	return file, func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		defer cancel()
		err := file.Close(ctx)
		st := file.Stats()
		if err != nil || st.Dropped > 0 {
			log.Warn("gateway: ledger export: entries lost", "path", f.export, "written", st.Written, "dropped", st.Dropped, "error", fmt.Sprint(err))
			return
		}
		log.Info("gateway: ledger export closed", "path", f.export, "written", st.Written, "rotations", st.Rotations)
	}, created, nil
}

// runGateway is the gateway command: it checks the flags, builds the
// gateway's options from them, opens the store, and serves on --listen
// until stopped. A start that fails before serving closes the store and
// leaves no database behind that it alone made.
func (c *cli) runGateway(f *gatewayFlags) error {
	const cmd = "gateway"
	urls, dur, err := f.validate(cmd)
	if err != nil {
		return err
	}
	opts, out, token, err := f.options(cmd, urls, dur)
	if err != nil {
		return err
	}
	tlsConfig, err := loadTLS(cmd, f.tlsCert, f.tlsKey)
	if err != nil {
		return err
	}
	log := c.logger()
	opts.Logger, opts.Ledger.Log, opts.Now, out.TLS = log, log, c.now, tlsConfig != nil
	closeSides, exportCreated, err := f.openSides(cmd, log, &opts)
	if err != nil {
		return err
	}
	st, err := c.openStore(cmd, f.redisURL, f.redisClock, dur, log)
	if err == nil {
		out.Redis, out.Durability = st.redis, st.durability
	}
	var g *gateway.Gateway
	if err == nil {
		g, err = st.gateway(opts)
	}
	var alog *audit.Log
	if err == nil {
		alog, err = st.audit(audit.Options{Retention: f.auditRetention, Log: log})
	}
	h, reload := http.Handler(g), reloader(g, f.config)
	if err == nil && token != "" {
		h, err = operatorSurface(consoleConfig{token: token, log: log, now: c.now, bodyTimeout: noBound(f.bodyTimeout), access: f.access, sessions: st.sessions, audit: alog, reload: configReload(reload, f.config)}, g.Keys(), g.Ledger(), g)
	}
	var ln net.Listener
	if err == nil {
		ln, err = listen(f.listen, tlsConfig)
	}
	if err != nil {
		closeAudit(alog)
		abandonGateway(g, st, closeSides, exportCreated)
		return err
	}
	if st.created != nil {
		log.Info("gateway: created the database: create keys through the admin API", "db", c.db)
	}
	out.Listen = ln.Addr().String()
	// The sides close after the gateway and its ledger, before the store.
	closeAll := func() error {
		closeSides()
		closeAudit(alog)
		return st.close()
	}
	return c.serve(ln, h, g, reload, closeAll, log, f.shutdown, func() error {
		logListening(ln, log, out)
		return c.emit(out, out.text)
	})
}

// openSides opens what the gateway sends its news to, the alerts' webhook
// and the ledger's export, into opts, and returns what closes them (after
// the gateway) and the files the export made.
func (f *gatewayFlags) openSides(cmd string, log *slog.Logger, opts *gateway.Options) (closeSides func(), created []string, err error) {
	alerts, closeAlerts, err := f.openAlerts(cmd, log)
	if err != nil {
		return nil, nil, err
	}
	export, closeExport, created, err := f.openExport(cmd, log)
	if err != nil {
		closeAlerts()
		return nil, nil, err
	}
	opts.Alerts, opts.Ledger.Export = alerts, export
	return func() { closeExport(); closeAlerts() }, created, nil
}

// abandonGateway undoes a start that failed before serving: it closes the
// gateway (its ledger) if it was made, the store if it was opened, and the
// export, and removes the files the start alone made.
func abandonGateway(g *gateway.Gateway, st *servingStore, closeExport func(), exportCreated []string) {
	if g != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeGrace)
		g.Close(ctx)
		cancel()
	}
	if st != nil {
		st.abandon()
	}
	closeExport()
	removeAll(exportCreated)
}

// validate checks the gateway command's flags, and returns the URL of
// each route's upstream, by prefix, and the durability asked for.
func (f *gatewayFlags) validate(cmd string) (map[string]*url.URL, ratestore.Durability, error) {
	urls, err := f.upstreamURLs(cmd)
	if err != nil {
		return nil, 0, err
	}
	switch {
	case f.upstreamKey != "" && f.keyEnvs.values[""] != "":
		return nil, 0, usagef(cmd, "%s: --upstream-key and a bare --upstream-key-env both name the default route's credential: give one", cmd)
	case !(f.rps >= 0) || math.IsInf(f.rps, 0) || f.burst < 0 || (f.burst > 0 && f.rps == 0):
		return nil, 0, usagef(cmd, "%s: --rps %v --burst %d: want a rate >= 0, and a burst >= 0 only with a rate", cmd, f.rps, f.burst)
	case f.attempts < 1 || f.queue < 0:
		return nil, 0, usagef(cmd, "%s: --upstream-attempts %d --upstream-queue-timeout %v: want at least 1 attempt and a wait >= 0", cmd, f.attempts, f.queue)
	case f.shutdown <= 0:
		return nil, 0, usagef(cmd, "%s: --shutdown-timeout %v: want a positive duration", cmd, f.shutdown)
	case f.maxTokens <= 0:
		return nil, 0, usagef(cmd, "%s: --default-max-tokens %d: want a positive number", cmd, f.maxTokens)
	case f.maxBody <= 0:
		return nil, 0, usagef(cmd, "%s: --max-request-body %d: want a positive number of bytes", cmd, f.maxBody)
	case f.maxCharge <= 0:
		return nil, 0, usagef(cmd, "%s: --max-tokens-per-request %d: want a positive number", cmd, f.maxCharge)
	case f.connect < 0 || f.firstByte < 0 || f.idle < 0 || f.drain < 0 || f.bodyTimeout < 0:
		return nil, 0, usagef(cmd, "%s: --connect-timeout %v --first-byte-timeout %v --idle-timeout %v --drain-timeout %v --body-timeout %v: want durations >= 0", cmd, f.connect, f.firstByte, f.idle, f.drain, f.bodyTimeout)
	case !strings.HasPrefix(f.statsPath, "/"):
		return nil, 0, usagef(cmd, "%s: --stats-path %q: want an absolute path", cmd, f.statsPath)
	}
	if err := f.validateLedger(cmd); err != nil {
		return nil, 0, err
	}
	dur, err := parseDurability(cmd, f.durability)
	if err != nil {
		return nil, 0, err
	}
	return urls, dur, nil
}

// upstreamURLs parses the --upstream URLs, by prefix, and checks that
// every route given a credential's variable or field has one.
func (f *gatewayFlags) upstreamURLs(cmd string) (map[string]*url.URL, error) {
	if len(f.upstreams.prefixes) == 0 && len(f.pools) == 0 {
		return nil, usagef(cmd, "%s: --upstream is required, or upstreams in --config", cmd)
	}
	urls := make(map[string]*url.URL, len(f.upstreams.prefixes))
	for _, prefix := range f.upstreams.prefixes {
		raw := f.upstreams.values[prefix]
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usagef(cmd, "%s: --upstream %q: want an http or https URL", cmd, routeArg(prefix, raw))
		}
		urls[prefix] = u
	}
	for _, p := range []*perRoute{f.keyEnvs, f.keyHeaders} {
		for _, prefix := range p.prefixes {
			if _, ok := urls[prefix]; !ok {
				return nil, usagef(cmd, "%s: %s %q: no --upstream for %s", cmd, p.flag, routeArg(prefix, p.values[prefix]), routeName(prefix))
			}
		}
	}
	return urls, nil
}

// options builds the gateway's options from the flags, urls being the
// routes' upstreams (see validate), with each route's credential and the
// admin token, and what the command prints once it listens. The options'
// Logger is left to the caller.
func (f *gatewayFlags) options(cmd string, urls map[string]*url.URL, dur ratestore.Durability) (gateway.Options, gatewayOut, string, error) {
	opts := gateway.Options{
		RPS: f.rps, Burst: f.burst, StatsPath: f.statsPath, Shadow: f.shadow,
		DefaultMaxTokens: f.maxTokens, MaxRequestBody: f.maxBody,
		ConnectTimeout: noBound(f.connect), FirstByteTimeout: noBound(f.firstByte), IdleTimeout: noBound(f.idle),
		DrainTimeout: noBound(f.drain), // negative: at once
		BodyTimeout:  noBound(f.bodyTimeout), MaxTokensPerRequest: f.maxCharge,
		Weights: f.weights, PricesFile: f.prices,
		Ledger: ledger.Options{Retention: f.retention}, NoLedger: f.noLedger,
		Upstreams: f.pools, UpstreamAttempts: f.attempts, UpstreamQueueTimeout: noBound(f.queue),
	}
	out := gatewayOut{Routes: []routeOut{}, Pools: []poolOut{}, StatsPath: f.statsPath, RPS: f.rps, Burst: f.burst, Durability: dur.String(), Shadow: f.shadow,
		Prices: f.prices, Unpriced: f.unpriced}
	var err error
	if opts.Unpriced, opts.DefaultPrice, err = f.unpricedOptions(); err != nil {
		return opts, out, "", fmt.Errorf("%s: %w", cmd, err)
	}
	for _, u := range f.pools {
		models := u.Models
		if len(models) == 0 && len(u.Deployments) > 0 {
			models = slices.Sorted(maps.Keys(u.Deployments)) // Azure's: those it has a deployment of
		}
		out.Pools = append(out.Pools, poolOut{Name: u.Name, API: u.API, URL: u.URL.Redacted(), Models: models})
	}
	for _, prefix := range f.upstreams.prefixes {
		key, env, err := f.credential(cmd, prefix)
		if err != nil {
			return opts, out, "", err
		}
		u, header := urls[prefix], f.keyHeaders.values[prefix]
		if prefix == "" {
			opts.Upstream, opts.UpstreamKey, opts.UpstreamKeyHeader = u, key, header
			out.Upstream = u.Redacted()
			continue
		}
		opts.Routes = append(opts.Routes, gateway.Route{Prefix: prefix, Upstream: u, UpstreamKey: key, UpstreamKeyHeader: header})
		out.Routes = append(out.Routes, routeOut{Prefix: prefix, Upstream: u.Redacted(), KeyEnv: env})
	}
	token, err := adminToken(f.adminTokenFile)
	if err != nil {
		return opts, out, "", fmt.Errorf("%s: %w", cmd, err)
	}
	if token != "" {
		if err := checkAdminToken(cmd, f.adminTokenFile, token); err != nil {
			return opts, out, "", err
		}
	}
	out.Admin = token != ""
	return opts, out, token, nil
}

// unpricedOptions returns --unpriced and the price --default-price-file
// gives, which --unpriced default needs and nothing else takes.
func (f *gatewayFlags) unpricedOptions() (gateway.Unpriced, pricing.Price, error) {
	u, err := gateway.ParseUnpriced(f.unpriced)
	switch {
	case err != nil:
		return 0, pricing.Price{}, fmt.Errorf("--unpriced: %w", err)
	case (u == gateway.UnpricedDefault) != (f.defaultPrice != ""):
		return 0, pricing.Price{}, usagef("", "--unpriced default and --default-price-file go together")
	case f.defaultPrice == "":
		return u, pricing.Price{}, nil
	}
	file, err := os.Open(f.defaultPrice)
	if err != nil {
		return 0, pricing.Price{}, fmt.Errorf("--default-price-file: %w", err)
	}
	defer file.Close()
	t, err := pricing.Parse(file)
	if err != nil {
		return 0, pricing.Price{}, fmt.Errorf("--default-price-file %s: %w", f.defaultPrice, err)
	}
	if t.Len() != 1 {
		return 0, pricing.Price{}, fmt.Errorf("--default-price-file %s: %d entries: want one, the default price", f.defaultPrice, t.Len())
	}
	p, _, _ := t.Lookup(t.Models()[0])
	return u, p, nil
}

// credential returns the credential of the route of prefix ("" for none)
// and the environment variable it came from ("" if none did). Credentials
// come from the environment, never from the command line, which shows in
// the process list; --upstream-key, for the default route, is the one
// exception. A variable named by --upstream-key-env must be set.
func (f *gatewayFlags) credential(cmd, prefix string) (key, env string, err error) {
	env = f.keyEnvs.values[prefix]
	switch {
	case env != "":
		if key = os.Getenv(env); key == "" {
			return "", "", fmt.Errorf("%s: --upstream-key-env %s: $%s is empty or not set", cmd, routeArg(prefix, env), env)
		}
	case prefix == "" && f.upstreamKey != "":
		key = f.upstreamKey
	case prefix == "":
		if key = os.Getenv(upstreamKeyEnv); key != "" {
			env = upstreamKeyEnv
		}
	}
	return key, env, nil
}

// parseDurability parses the --durability of the serving commands.
func parseDurability(cmd, v string) (ratestore.Durability, error) {
	switch v {
	case ratestore.Sync.String():
		return ratestore.Sync, nil
	case ratestore.Async.String():
		return ratestore.Async, nil
	}
	return 0, usagef(cmd, "%s: --durability %q: want sync or async", cmd, v)
}

// routeArg is a per-route flag's value as it was given.
func routeArg(prefix, value string) string {
	if prefix == "" {
		return value
	}
	return prefix + "=" + value
}

// routeName names a route in messages.
func routeName(prefix string) string {
	if prefix == "" {
		return "the default route"
	}
	return "the route " + prefix
}

// parseWeights parses --weights: input=W,output=W,cache_read=W,cache_write=W,
// any subset (the others 1), each W a finite number >= 0.
func parseWeights(v string) (*gateway.Weights, error) {
	w := gateway.UnitWeights
	fields := map[string]*float64{"input": &w.Input, "output": &w.Output, "cache_read": &w.CacheRead, "cache_write": &w.CacheWrite}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(v, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, known := fields[name]
		switch {
		case !ok || !known:
			return nil, fmt.Errorf("%q: want TYPE=WEIGHT, TYPE one of input, output, cache_read, cache_write", part)
		case seen[name]:
			return nil, fmt.Errorf("%s given twice", name)
		}
		x, err := strconv.ParseFloat(num, 64)
		if err != nil || !(x >= 0) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s=%s: want a number >= 0", name, num)
		}
		*f, seen[name] = x, true
	}
	return &w, nil
}

// noBound maps a timeout flag to its gateway.Options field: 0 (no bound)
// is negative there, where 0 means the default.
func noBound(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// logListening logs that the gateway listens on ln, with a warning for
// each exposure worth one: listening beyond loopback (the admin API and
// console too, if they answer, and without TLS), and shadow mode.
func logListening(ln net.Listener, log *slog.Logger, out gatewayOut) {
	if beyondLoopback(ln) {
		log.Warn("gateway: listening beyond loopback: other hosts can reach it", "listen", out.Listen)
		if out.Admin && !out.TLS {
			warnClearText(log, "gateway", out.Listen)
		}
	}
	if out.Shadow {
		log.Warn("gateway: shadow mode: requests over a key's limits or models are served and logged, not refused")
	}
	log.Info("gateway: listening", "listen", out.Listen, "upstream", out.Upstream, "routes", out.Routes, "upstreams", len(out.Pools),
		"durability", out.Durability, "redis", out.Redis, "shadow", out.Shadow, "admin", out.Admin)
}

// text writes out as the gateway command prints it without --json: where
// it listens and where each path goes.
func (out gatewayOut) text(w io.Writer) {
	scheme := "http"
	if out.TLS {
		scheme = "https"
	}
	if out.Admin {
		defer fmt.Fprintf(w, "console at %s://%s/admin/ (sign in with the admin token)\n", scheme, out.Listen)
	}
	switch {
	case len(out.Pools) > 0:
		fmt.Fprintf(w, "gateway listening on %s://%s, forwarding by api and model, then by path:\n", scheme, out.Listen)
		for _, p := range out.Pools {
			models := "every model"
			if len(p.Models) > 0 {
				models = strings.Join(p.Models, ",")
			}
			fmt.Fprintf(w, "  %s %s (%s) -> %s\n", p.API, models, p.Name, p.URL)
		}
	case len(out.Routes) == 0:
		fmt.Fprintf(w, "gateway listening on %s://%s, forwarding to %s\n", scheme, out.Listen, out.Upstream)
		return
	default:
		fmt.Fprintf(w, "gateway listening on %s://%s, forwarding by path:\n", scheme, out.Listen)
	}
	for _, r := range out.Routes {
		fmt.Fprintf(w, "  %s -> %s\n", r.Prefix, r.Upstream)
	}
	if out.Upstream != "" {
		fmt.Fprintf(w, "  (any other path) -> %s\n", out.Upstream)
	} else {
		fmt.Fprintf(w, "  (any other path) -> 404\n")
	}
}
