package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore/internal/fakeprovider"
	"github.com/ratestore/ratestore/internal/logbuf"
)

// env is the environment of the command lines of the tests.
func env(name string) string {
	return map[string]string{"AZURE_KEY": "az-secret"}[name]
}

// TestParse: the flags make the Options; a wrong command line, or a
// credential variable that is not set, is refused.
func TestParse(t *testing.T) {
	cfg, err := parse(strings.Fields("-listen 127.0.0.1:18103 -api azure-openai -key-env AZURE_KEY -tpm 450000 -rpm 60 -concurrent 4 -fail 503 -api-version 2024-10-21 -deployments gpt4o-prod,mini"), env, io.Discard)
	require.NoError(t, err)
	require.Equal(t, config{listen: "127.0.0.1:18103", fail: 503, opts: fakeprovider.Options{API: fakeprovider.AzureOpenAI, Key: "az-secret",
		TokensPerMinute: 450000, RequestsPerMinute: 60, MaxConcurrent: 4, APIVersion: "2024-10-21", Deployments: []string{"gpt4o-prod", "mini"}}}, cfg)
	cfg, err = parse(nil, env, io.Discard)
	require.NoError(t, err)
	require.Equal(t, config{listen: "127.0.0.1:18101", opts: fakeprovider.Options{API: fakeprovider.OpenAI}}, cfg)

	for args, want := range map[string]string{
		"-key-env OPENAI_KEY_A": "-key-env OPENAI_KEY_A: the variable is empty or not set",
		"-api bedrock":          `-api "bedrock": want openai, azure-openai, anthropic or gemini`,
		"-fail 200":             "-fail 200: want a 4xx or 5xx status",
		"-tpm 10 extra":         `unexpected arguments: ["extra"]`,
		"-tpm ten":              `invalid value "ten" for flag -tpm`,
	} {
		_, err := parse(strings.Fields(args), env, io.Discard)
		require.ErrorContains(t, err, want, args)
	}
	_, err = parse([]string{"-h"}, env, io.Discard)
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Equal(t, 2, run(context.Background(), []string{"-api", "x"}, env, io.Discard))
}

// TestServe: the command serves its provider, failing as told, logs a
// line a request, and its stats when it stops.
func TestServe(t *testing.T) {
	cfg, err := parse(strings.Fields("-api anthropic -key-env AZURE_KEY -fail 529"), env, io.Discard)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var logs logbuf.Buffer
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln, cfg.provider(), slog.New(slog.NewTextHandler(&logs, nil))) }()

	req, err := http.NewRequest(http.MethodPost, "http://"+ln.Addr().String()+"/v1/messages", strings.NewReader(`{"model":"m"}`))
	require.NoError(t, err)
	req.Header.Set("x-api-key", "az-secret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, 529, resp.StatusCode)
	require.Contains(t, string(body), "overloaded_error")
	stop()
	require.NoError(t, <-served)
	require.Contains(t, logs.String(), "method=POST path=/v1/messages status=529")
	require.Contains(t, logs.String(), `msg="fakeprovider: stopped" requests=1 served=0 limited=0 failed=1`)
}
