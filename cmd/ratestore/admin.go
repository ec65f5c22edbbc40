package main

import (
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/ratestore/ratestore/admin"
)

// adminTokenEnv is the environment variable of the admin token, read by
// the gateway command (which opens its admin API with it) and by the key
// commands given --admin (which send it).
const adminTokenEnv = "RATESTORE_ADMIN_TOKEN"

// adminTimeout bounds one call of the admin API: a key store call is
// milliseconds, so a gateway that takes longer is stuck or unreachable.
const adminTimeout = 30 * time.Second

// adminToken returns the admin token: the content of file when file is
// not "" (--admin-token-file), else $RATESTORE_ADMIN_TOKEN (see
// tokenFrom). Without a file, no token is "" and no error: the gateway
// then runs without its admin API, and a key command says what it lacks.
func adminToken(file string) (string, error) {
	return tokenFrom("--admin-token-file", file, adminTokenEnv)
}

// tokenFrom returns a token: the content of file when file is not "" (the
// flag that named it, which keeps the token out of the process list and
// the environment), else the variable env; surrounding white space (the
// newline an editor leaves) is trimmed. A file that is empty, or cannot be
// read, is an error: it was named to hold a token.
func tokenFrom(flag, file, env string) (string, error) {
	if file == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", flag, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s %s: the file is empty: want the token", flag, file)
	}
	return token, nil
}

// adminClient returns the client of the admin API of the gateway at
// rawURL (--admin), with the admin token of tokenFile or the environment
// (see adminToken). Plain http to a host other than loopback sends the
// token in the clear: warn writes a warning about it.
func adminClient(rawURL, tokenFile string, warn io.Writer) (*admin.Client, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, usagef("", "--admin %q: want the gateway's http or https URL, as http://%s", rawURL, defaultListen)
	}
	token, err := adminToken(tokenFile)
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, usagef("", "--admin %s: no admin token: set $%s or give --admin-token-file, as the gateway was given", rawURL, adminTokenEnv)
	}
	ac, err := admin.NewClient(rawURL, token)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		fmt.Fprintf(warn, "ratestore: warning: --admin %s: the admin token goes over plain http to a host that is not loopback\n", u.Redacted())
	}
	return ac, nil
}

// loopback reports whether host is a loopback address or localhost.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
