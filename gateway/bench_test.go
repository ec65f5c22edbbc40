package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"testing"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/internal/backendtest"
)

// BenchmarkProxy measures what the gateway adds to a request: one client
// at a time, over loopback, against a bare httputil.ReverseProxy to the
// same fake upstream (a JSON chat completion of 7 tokens). The gateway
// checks the key, forwards, meters the body and records its usage: in
// Sync mode each request waits for the fsync of its usage (group commit
// shares it only between concurrent requests); in Async mode it does not.
// Each runs with the spend ledger on (the default) and off.
//
//	go test -run '^$' -bench Proxy -benchtime 2000x ./gateway/
func BenchmarkProxy(b *testing.B) {
	body, _ := json.Marshal(withModel(fakeReq{Input: 3, Output: 4}))
	run := func(b *testing.B, url, secret string) {
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		defer client.CloseIdleConnections()
		b.ReportAllocs()
		for b.Loop() {
			req, _ := http.NewRequest("POST", url+"/v1/chat/completions", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+secret)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Fatalf("status %d", resp.StatusCode)
			}
		}
	}
	b.Run("bare", func(b *testing.B) {
		up := newUpstream(b)
		u := up.url(b)
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = 256
		srv := httptest.NewServer(&httputil.ReverseProxy{Transport: t, Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(u) }})
		defer srv.Close()
		run(b, srv.URL, "unused")
	})
	// With the spend ledger (the default) and without: what an entry and
	// its rollups add to a request, in the same run.
	// On a bolt database in each durability mode, which flushes as a
	// gateway's does (the tests' hour would leave Async nothing to write).
	for _, c := range []struct {
		be       backendtest.Backend
		noLedger bool
	}{{backendtest.BoltAsync, false}, {backendtest.BoltAsync, true}, {backendtest.BoltSync, false}, {backendtest.BoltSync, true}} {
		name := "gateway-" + c.be.Durability().String()
		if c.noLedger {
			name += "-noledger"
		}
		b.Run(name, func(b *testing.B) {
			e := newEnvOn(b, c.be, ratestore.Options{FlushInterval: ratestore.DefaultFlushInterval}, Options{NoLedger: c.noLedger}, operator{})
			_, secret := e.key("bench", 1<<60)
			// The test server's wrapper signals each request; drain it.
			done := make(chan struct{})
			defer close(done)
			go func() {
				for {
					select {
					case <-e.served:
					case <-done:
						return
					}
				}
			}()
			run(b, e.srv.URL, secret)
		})
	}
}
