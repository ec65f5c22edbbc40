package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/admin"
	"github.com/ratestore/ratestore/console"
)

// consoleToken is the admin token of the console command's tests.
const consoleToken = "console-command-token-0123456789"

// startCommand runs the command line args (after --db and --json) in the
// background until the test ends, and waits for the JSON object it prints
// once it listens.
func (e *env) startCommand(args ...string) *gatewayRun {
	e.t.Helper()
	g := &gatewayRun{stdout: newLines(), stderr: newLines(), code: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	g.cancel = cancel
	args = append([]string{"--db", e.db, "--json"}, args...)
	cfg := config{Now: func() time.Time { return now }, Terminal: func(io.Writer) bool { return false }}
	go func() { g.code <- run(ctx, args, strings.NewReader(""), g.stdout, g.stderr, cfg) }()
	e.t.Cleanup(func() {
		cancel()
		<-g.code
	})
	g.stdout.await(e.t, "}")
	return g
}

// consoleCall sends a request to a console or gateway at base with the
// session cookie and CSRF token given ("" for none), through client; a
// body is JSON.
func consoleCall(t *testing.T, client *http.Client, method, url, body, cookie, csrf string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
	}
	if csrf != "" {
		req.Header.Set(console.CSRFHeader, csrf)
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// consoleSignIn signs in at base and returns the cookie and the session.
func consoleSignIn(t *testing.T, client *http.Client, base, token string) (*http.Cookie, console.Session) {
	t.Helper()
	resp, body := consoleCall(t, client, "POST", base+"/admin/session", `{"token":"`+token+`"}`, "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var s console.Session
	require.NoError(t, json.Unmarshal([]byte(body), &s))
	require.Len(t, resp.Cookies(), 1)
	return resp.Cookies()[0], s
}

// TestConsoleCommand: the console command serves the page and a
// read-only admin API on a closed database: GETs work, changes get 403
// read_only, nothing else is served, the token is never logged, and the
// database's files are not written at all (their bytes and times stay).
func TestConsoleCommand(t *testing.T) {
	e := newEnv(t)
	created := jsonOf[admin.Created](e, "keys", "create", "--name", "seen", "--limit", "1000")
	before := digests(t, e.db)
	t.Setenv(adminTokenEnv, consoleToken)
	g := e.startCommand("console", "--listen", "127.0.0.1:0")
	var out consoleOut
	require.NoError(t, json.Unmarshal([]byte(g.stdout.String()), &out))
	require.Equal(t, consoleOut{Listen: out.Listen, URL: "http://" + out.Listen + "/admin/", ReadOnly: true}, out)
	base := "http://" + out.Listen
	c := http.DefaultClient

	resp, body := consoleCall(t, c, "GET", out.URL, "", "", "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, body, "<html")
	ck, s := consoleSignIn(t, c, base, consoleToken)
	require.True(t, s.ReadOnly)
	resp, body = consoleCall(t, c, "GET", base+"/admin/keys", "", ck.Value, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Contains(t, body, created.Key.ID)
	require.NotContains(t, body, created.Secret)
	resp, body = consoleCall(t, c, "PATCH", base+"/admin/keys/"+created.Key.ID, `{"disabled":true}`, ck.Value, s.CSRF)
	require.Equal(t, http.StatusForbidden, resp.StatusCode, body)
	require.Contains(t, body, `"code":"read_only"`)
	resp, _ = send(t, "GET", base+"/admin/spend", "", consoleToken)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, _ = send(t, "POST", base+"/v1/chat/completions", `{"model":"m"}`, created.Secret)
	require.Equal(t, http.StatusNotFound, resp.StatusCode)

	require.Equal(t, exitOK, g.stop())
	require.Equal(t, before, digests(t, e.db), "the read-only console wrote to the database's files")
	require.NotContains(t, g.stderr.String(), consoleToken)
	require.NotContains(t, g.stderr.String(), "clear text")
	require.False(t, e.keyOf(created.Key.ID).Disabled, "nothing changed")
}

// digests returns the SHA-256 and modification time of each file of the
// database at path: the bbolt file and its log, or every file of a badger
// directory.
func digests(t *testing.T, path string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(path + "*")
	require.NoError(t, err)
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		files, err = filepath.Glob(filepath.Join(path, "*"))
		require.NoError(t, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		fi, err := os.Stat(f)
		require.NoError(t, err)
		out[f] = fmt.Sprintf("%x %v", sha256.Sum256(b), fi.ModTime().UnixNano())
	}
	require.NotEmpty(t, out)
	return out
}

// keyOf reads key id from the closed database.
func (e *env) keyOf(id string) admin.Key {
	e.t.Helper()
	return jsonOf[admin.Key](e, "keys", "show", id)
}

// TestConsoleCommandRefusals: no admin token, no database, a database in
// use, and half a TLS pair are refused, each saying why.
func TestConsoleCommandRefusals(t *testing.T) {
	e := newEnv(t)
	t.Setenv(adminTokenEnv, "")
	r := e.run("console", "--listen", "127.0.0.1:0")
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "console: no admin token: set $RATESTORE_ADMIN_TOKEN or give --admin-token-file")

	t.Setenv(adminTokenEnv, consoleToken)
	r = e.run("console", "--listen", "127.0.0.1:0")
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "no database at "+e.db)
	_, err := os.Stat(e.db)
	require.ErrorIs(t, err, os.ErrNotExist, "the console creates no database")

	e.ok("keys", "create", "--name", "k", "--limit", "10")
	db, err := ratestore.Open(e.db, ratestore.Options{})
	require.NoError(t, err)
	r = e.run("console", "--listen", "127.0.0.1:0")
	require.NoError(t, db.Close())
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "console: "+e.db+" is in use: a running gateway (or another command) holds it")

	for _, args := range [][]string{{"--tls-cert", "c.pem"}, {"--tls-key", "k.pem"}} {
		r = e.run(append([]string{"console"}, args...)...)
		require.Equal(t, exitUsage, r.code, args)
		require.Contains(t, r.stderr, "--tls-cert and --tls-key go together")
		r = e.run(append([]string{"gateway", "--upstream", "http://x"}, args...)...)
		require.Equal(t, exitUsage, r.code, args)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	require.NoError(t, os.WriteFile(bad, []byte("not a certificate"), 0o600))
	r = e.run("console", "--tls-cert", bad, "--tls-key", bad)
	require.Equal(t, exitError, r.code)
	require.Contains(t, r.stderr, "--tls-cert "+bad)
}

// TestServeTLS: the gateway and console commands serve over TLS with
// --tls-cert and --tls-key: the session cookie is Secure, no clear-text
// warning is logged beyond loopback; without TLS there, it is.
func TestServeTLS(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer up.Close()
	e := newEnv(t)
	t.Setenv(adminTokenEnv, consoleToken)
	cert, key, pool := selfSigned(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()

	g := e.startGateway("--upstream", up.URL, "--listen", "0.0.0.0:0", "--tls-cert", cert, "--tls-key", key)
	require.True(t, g.out.TLS)
	_, port, err := net.SplitHostPort(g.out.Listen)
	require.NoError(t, err)
	base := "https://127.0.0.1:" + port
	ck, _ := consoleSignIn(t, client, base, consoleToken)
	require.True(t, ck.Secure)
	require.True(t, ck.HttpOnly)
	resp, body := consoleCall(t, client, "GET", base+"/admin/live", "", ck.Value, "")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	require.Equal(t, "max-age=31536000", resp.Header.Get("Strict-Transport-Security"))
	resp, _ = consoleCall(t, client, "GET", base+"/v1/models", "", "", "")
	require.Equal(t, "max-age=31536000", resp.Header.Get("Strict-Transport-Security"), "the proxy's answers too")
	resp, _ = consoleCall(t, http.DefaultClient, "GET", "http://127.0.0.1:"+port+"/admin/", "", "", "")
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain http to the TLS port")
	require.Equal(t, exitOK, g.stop())
	require.Contains(t, g.stderr.String(), "listening beyond loopback")
	require.NotContains(t, g.stderr.String(), "clear text")

	g = e.startGateway("--upstream", up.URL, "--listen", "0.0.0.0:0")
	g.stderr.await(t, "gateway: the admin API is reachable beyond loopback in clear text, and so is the console")
	require.Equal(t, exitOK, g.stop())

	c := e.startCommand("console", "--listen", "0.0.0.0:0")
	c.stderr.await(t, "console: the admin API is reachable beyond loopback in clear text")
	require.Equal(t, exitOK, c.stop())
	c = e.startCommand("console", "--listen", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	var out consoleOut
	require.NoError(t, json.Unmarshal([]byte(c.stdout.String()), &out))
	require.True(t, out.TLS)
	require.Equal(t, "https://"+out.Listen+"/admin/", out.URL)
	ck, s := consoleSignIn(t, client, "https://"+out.Listen, consoleToken)
	require.True(t, ck.Secure)
	require.True(t, s.ReadOnly)
	require.Equal(t, exitOK, c.stop())
	require.NotContains(t, c.stderr.String(), consoleToken)
}

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key
// as PEM files, and returns them with a pool that trusts the certificate.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ratestore test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600))
	c, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}
