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
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	Addr string // host:port
	cmd  *exec.Cmd
}

// URL is the server's redis:// URL, database 0.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Stop kills the server (SIGKILL: what a crash or a lost network leaves).
func (s *Server) Stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// Start starts a redis-server on a free loopback port; extra are more
// arguments of its command line.
func Start(t testing.TB, extra ...string) *Server {
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
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--loglevel", "warning"}, extra...)
		cmd := exec.Command(path, args...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("redis-server: %v", err)
		}
		s := &Server{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
		if err := waitPing(s.Addr); err != nil {
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

// waitPing waits until the server at addr answers PING.
func waitPing(addr string) error {
	deadline := time.Now().Add(startTimeout)
	for {
		err := ping(addr)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
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
