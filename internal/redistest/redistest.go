// Package redistest starts real redis-server processes for tests: one
// server, or a Redis Cluster of three nodes, each on a free loopback port,
// with no persistence, stopped when the test ends.
//
// redis-server is Debian's redis-server package. Without it the tests that
// need it skip, unless RATESTORE_REQUIRE_REDIS is set (as .ci/run sets it),
// when they fail instead.
package redistest

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RequireEnv makes a missing redis-server fail the tests instead of
// skipping them.
const RequireEnv = "RATESTORE_REQUIRE_REDIS"

// startTimeout bounds a server's start, and a cluster's agreement.
const startTimeout = 20 * time.Second

// Server is one running redis-server.
type Server struct {
	Addr   string // host:port
	cmd    *exec.Cmd
	scheme string // "rediss" for TLS; "" for redis
}

// URL is the server's redis:// (or rediss://) URL, database 0.
func (s *Server) URL() string {
	if s.scheme == "" {
		return "redis://" + s.Addr + "/0"
	}
	return s.scheme + "://" + s.Addr + "/0"
}

// Stop kills the server (SIGKILL: what a crash or a lost network leaves).
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// Start starts a redis-server on a free loopback port; extra are more
// arguments of its command line.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	return start(t, "--port", nil, extra...)
}

// StartTLS starts a redis-server that speaks TLS only, with a certificate
// for 127.0.0.1 from a CA made for the test, and returns it with a client
// configuration that trusts that CA. Its URL is rediss://.
func StartTLS(t testing.TB) (*Server, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	caFile, certFile, keyFile, client := makeCerts(t, dir)
	s := start(t, "--tls-port", client, "--port", "0", "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", "no")
	return s, client
}

// start starts a redis-server listening on a free port given by portFlag,
// answering PING over TLS when tlsConfig is set.
func start(t testing.TB, portFlag string, tlsConfig *tls.Config, extra ...string) *Server {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv(RequireEnv) != "" {
			t.Fatalf("redis-server not found, and %s is set: %v", RequireEnv, err)
		}
		t.Skip("redis-server not installed (apt-get install redis-server)")
	}
	dir := t.TempDir()
	for attempt := 0; ; attempt++ {
		port := freePort(t)
		args := append([]string{portFlag, strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--loglevel", "warning"}, extra...)
		cmd := exec.Command(path, args...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("redis-server: %v", err)
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}

		if tlsConfig != nil {
			s.scheme = "rediss"
		}
		if err := waitPing(s.Addr, tlsConfig); err != nil {
			s.Stop()
			if attempt < 3 { // the port was taken in between
				continue
			}
			t.Fatalf("redis-server did not start: %v\n%s", err, out.String())
		}
		t.Cleanup(s.Stop)
		return s
	}
}

// StartCluster starts a Redis Cluster of n masters (no replicas), the hash
// slots spread evenly over them, and returns its URL in go-redis's cluster
// form: one node's, the others as addr parameters.
func StartCluster(t testing.TB, n int) string {
	t.Helper()
	nodes := make([]*Server, n)
	for i := range nodes {
		nodes[i] = Start(t, "--cluster-enabled", "yes", "--cluster-config-file", fmt.Sprintf("nodes-%d.conf", i),
			"--cluster-node-timeout", "5000")
	}
	ctx := context.Background()
	clients := make([]*redis.Client, n)
	for i, s := range nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: s.Addr})
		defer clients[i].Close()
	}
	const slots = 16384
	for i, c := range clients {
		lo, hi := i*slots/n, (i+1)*slots/n-1
		if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %v", nodes[i].Addr, err)
		}
	}
	for _, s := range nodes[1:] {
		host, port, _ := net.SplitHostPort(s.Addr)
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			t.Fatalf("CLUSTER MEET %s: %v", s.Addr, err)
		}
	}
	deadline := time.Now().Add(startTimeout)
	for i, c := range clients {
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(n)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the cluster did not form on node %d: %v\n%s", i, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	url := "redis://" + nodes[0].Addr
	for i, s := range nodes[1:] {
		if i == 0 {
			url += "?"
		} else {
			url += "&"
		}
		url += "addr=" + s.Addr
	}
	return url
}

// freePort returns a loopback port free at the time of the call.
func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitPing waits until the server at addr answers PING, over TLS with
// tlsConfig when set.
func waitPing(addr string, tlsConfig *tls.Config) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := ping(addr, tlsConfig)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ping(addr string, tlsConfig *tls.Config) error {
	var c net.Conn
	var err error
	if tlsConfig != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, tlsConfig)
	} else {
		c, err = net.DialTimeout("tcp", addr, time.Second)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// makeCerts writes a CA and a certificate for 127.0.0.1 signed by it into
// dir, and returns their files and a client configuration trusting the CA.
func makeCerts(t testing.TB, dir string) (caFile, certFile, keyFile string, client *tls.Config) {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	caKey, key := newKey(), newKey()
	now := time.Now()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redistest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return write("ca.crt", "CERTIFICATE", caDER), write("redis.crt", "CERTIFICATE", leafDER),
		write("redis.key", "EC PRIVATE KEY", keyDER), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// CountTrips counts the round trips client makes from now on (commands
// and pipelines sent), and returns a function that reports them.
func CountTrips(client redis.UniversalClient) func() int64 {
	h := &trips{}
	client.AddHook(h)
	return h.n.Load
}

// trips is a go-redis hook counting round trips.
type trips struct{ n atomic.Int64 }

func (*trips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *trips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *trips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
