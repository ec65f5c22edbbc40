// Command fakeprovider serves one fake model provider (package
// internal/fakeprovider) until interrupted, for an operator's walkthrough
// of the gateway's upstream pools: three of them in three shells, each on
// its own address, and a gateway in front. Its flags are in the
// package documentation of internal/fakeprovider.
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
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ratestore/ratestore/internal/fakeprovider"
	"github.com/ratestore/ratestore/internal/httpstatus"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	os.Exit(code)
}

// run serves the provider of args until ctx ends, and returns the exit
// code: 2 for a wrong command line, 1 for a failure to serve.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	cfg, err := parse(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "fakeprovider:", err)
		return 2
	}
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		fmt.Fprintln(stderr, "fakeprovider:", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log.Info("fakeprovider: serving", "api", cfg.opts.API, "addr", ln.Addr().String(),
		"tpm", cfg.opts.TokensPerMinute, "rpm", cfg.opts.RequestsPerMinute, "concurrent", cfg.opts.MaxConcurrent, "fail", cfg.fail)
	if err := serve(ctx, ln, cfg.provider(), log); err != nil {
		fmt.Fprintln(stderr, "fakeprovider:", err)
		return 1
	}
	return 0
}

// config is a command line.
type config struct {
	listen string
	opts   fakeprovider.Options
	fail   int
	delay  time.Duration
}

// parse reads a command line; the credential is in the environment
// variable -key-env names, read with getenv.
func parse(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("fakeprovider", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:18101", "the address to serve on")
	fs.StringVar(&cfg.opts.API, "api", fakeprovider.OpenAI, "the API it speaks: openai, azure-openai, anthropic or gemini")
	keyEnv := fs.String("key-env", "", "the environment variable holding the credential requests must carry (none when not given)")
	fs.Int64Var(&cfg.opts.TokensPerMinute, "tpm", 0, "tokens per minute (0: no limit)")
	fs.Int64Var(&cfg.opts.RequestsPerMinute, "rpm", 0, "requests per minute (0: no limit)")
	fs.IntVar(&cfg.opts.MaxConcurrent, "concurrent", 0, "requests in flight at once (0: no limit)")
	fs.IntVar(&cfg.fail, "fail", 0, "answer every request with this status, 4xx or 5xx (0: answer)")
	fs.DurationVar(&cfg.delay, "delay", 0, "wait this long before each answer")
	fs.StringVar(&cfg.opts.APIVersion, "api-version", "", "azure-openai: the api-version requests must have (any when empty)")
	deployments := fs.String("deployments", "", "azure-openai: its deployments, comma-separated (any when empty)")
	models := fs.String("models", "", "the models it serves, comma-separated (any when empty)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	switch cfg.opts.API {
	case fakeprovider.OpenAI, fakeprovider.AzureOpenAI, fakeprovider.Anthropic, fakeprovider.Gemini:
	default:
		return cfg, fmt.Errorf("-api %q: want openai, azure-openai, anthropic or gemini", cfg.opts.API)
	}
	if cfg.fail != 0 && (cfg.fail < 400 || cfg.fail > 599) {
		return cfg, fmt.Errorf("-fail %d: want a 4xx or 5xx status", cfg.fail)
	}
	if *keyEnv != "" {
		if cfg.opts.Key = getenv(*keyEnv); cfg.opts.Key == "" {
			return cfg, fmt.Errorf("-key-env %s: the variable is empty or not set", *keyEnv)
		}
	}
	cfg.opts.Deployments, cfg.opts.Models = list(*deployments), list(*models)
	return cfg, nil
}

// list is a comma-separated flag's values; nil when empty.
func list(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// provider is the Provider of cfg, failing and delayed as cfg says.
func (cfg config) provider() *fakeprovider.Provider {
	p := fakeprovider.New(cfg.opts)
	if cfg.fail != 0 {
		p.Fail(cfg.fail)
	}
	p.SetDelay(cfg.delay)
	return p
}

// serve serves p on ln until ctx ends, logging each request and, at the
// end, p's Stats.
func serve(ctx context.Context, ln net.Listener, p *fakeprovider.Provider, log *slog.Logger) error {
	srv := &http.Server{Handler: logged(p, log), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shut, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shut); err != nil {
		srv.Close() // calls held or hanging
	}
	s := p.Stats()
	log.Info("fakeprovider: stopped", "requests", s.Requests, "served", s.Served, "limited", s.Limited,
		"failed", s.Failed, "refused", s.Refused, "canceled", s.Canceled, "tokens", s.TokensCharged, "max_in_flight", s.MaxInFlight)
	return nil
}

// logged is h logging a line a request: its method, path, status (0: no
// answer, the connection cut or the call hung) and duration.
func logged(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &httpstatus.Writer{ResponseWriter: w}
		defer func() {
			log.Info("request", "method", r.Method, "path", r.URL.Path, "status", sw.Status, "duration", time.Since(start).Round(time.Millisecond))
		}()
		h.ServeHTTP(sw, r)
	})
}
