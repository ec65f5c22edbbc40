package bench

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratestore/ratestore"
	"github.com/ratestore/ratestore/server"
)

// serveConns is how many client connections BenchmarkServeRESP drives:
// the target is stated at 64.
const serveConns = 64

// BenchmarkServeRESP is `ratestore serve`'s RESP side over loopback:
// serveConns connections, each one request at a time (no pipelining), on
// keys drawn from 10k, every call allowed (a GCRA of a million at once,
// a million per second). The sides, in one run:
//
//   - ratestore-async, ratestore-sync: package server on a bbolt DB,
//     CL.THROTTLE key 999999 1000000 1;
//   - redis-lua: redis-server (Debian's package, when installed; the side
//     is skipped otherwise) running a GCRA Lua script by EVALSHA, with the
//     same reply: what a program that wants CL.THROTTLE without the
//     redis-cell module runs. Nothing is persisted (no RDB, no AOF).
//
// decisions/s is over all connections; the target is >= 50k/s on 2 cores.
func BenchmarkServeRESP(b *testing.B) {
	keys := makeKeys(10_000)
	for _, impl := range []string{"ratestore-async", "ratestore-sync", "redis-lua"} {
		b.Run("impl="+impl, func(b *testing.B) {
			addr, command := startRESP(b, impl)
			conns := make([]*respClient, serveConns)
			for i := range conns {
				c, err := dialRESP(addr)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				conns[i] = c
			}
			var next, failed atomic.Int64
			b.SetParallelism(max(1, serveConns/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := conns[int(next.Add(1)-1)%len(conns)]
				i := int(next.Load()) * 7919
				for pb.Next() {
					i++
					if err := c.call(command(keys[i%len(keys)])); err != nil {
						failed.Add(1)
						return
					}
				}
			})
			b.StopTimer()
			if failed.Load() > 0 {
				b.Fatalf("%d connections failed", failed.Load())
			}
			if s := b.Elapsed().Seconds(); s > 0 {
				b.ReportMetric(float64(b.N)/s, "decisions/s")
			}
		})
	}
}

// startRESP starts the side impl and returns its address and the command
// of a decision on a key.
func startRESP(b *testing.B, impl string) (string, func(key string) []byte) {
	switch impl {
	case "redis-lua":
		return startRedisLua(b)
	}
	d := ratestore.Async
	if impl == "ratestore-sync" {
		d = ratestore.Sync
	}
	db, err := ratestore.Open(filepath.Join(b.TempDir(), "serve.db"), ratestore.Options{Durability: d})
	if err != nil {
		b.Fatal(err)
	}
	s := server.New(db, server.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go s.ServeRESP(ln)
	b.Cleanup(func() { s.Close(); db.Close() })
	return ln.Addr().String(), func(key string) []byte {
		return respCommand("CL.THROTTLE", key, "999999", "1000000", "1")
	}
}

// gcraLua is the redis-lua side's script: GCRA on the key's TAT in
// microseconds of Redis's clock, with CL.THROTTLE's reply. ARGV: the
// limit, the emission interval in microseconds, the quantity.
const gcraLua = `
local limit, t, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local tau = limit * t
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local nxt = tat + n * t
local limited, retry = 0, -1
if nxt - now > tau then
  limited = 1
  if n <= limit then retry = math.ceil((nxt - now - tau) / 1000000) end
  nxt = tat
elseif n > 0 then
  redis.call('SET', KEYS[1], nxt, 'PX', math.ceil((nxt - now) / 1000) + 1)
end
local ahead = nxt - now
return {limited, limit, math.floor((tau - ahead) / t), retry, math.ceil(ahead / 1000000)}
`

// startRedisLua starts redis-server on a free loopback port, loads
// gcraLua, and returns the server's address and the EVALSHA of a decision.
func startRedisLua(b *testing.B) (string, func(key string) []byte) {
	path, err := exec.LookPath("redis-server")
	if err != nil {
		b.Skip("redis-server not installed (apt-get install redis-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	ln.Close()
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", b.TempDir())
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var c *respClient
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err = dialRESP(addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("redis-server did not start: %v", err)
		}
	}
	defer c.Close()
	if _, err := c.w.Write(respCommand("SCRIPT", "LOAD", gcraLua)); err != nil {
		b.Fatal(err)
	}
	c.w.Flush()
	c.r.ReadString('\n') // $40
	sha, err := c.r.ReadString('\n')
	if err != nil || len(sha) < 40 {
		b.Fatalf("SCRIPT LOAD: %q, %v", sha, err)
	}
	sha = sha[:40]
	return addr, func(key string) []byte {
		return respCommand("EVALSHA", sha, "1", key, "1000000", "1", "1")
	}
}

// respCommand encodes a command as an array of bulk strings.
func respCommand(args ...string) []byte {
	buf := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		buf = append(buf, '$')
		buf = strconv.AppendInt(buf, int64(len(a)), 10)
		buf = append(buf, "\r\n"...)
		buf = append(buf, a...)
		buf = append(buf, "\r\n"...)
	}
	return buf
}

// respClient sends one command at a time and reads its five-integer reply.
type respClient struct {
	net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

func dialRESP(addr string) (*respClient, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &respClient{Conn: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// call sends cmd and reads a reply of "*5" and five integers, failing on
// anything else.
func (c *respClient) call(cmd []byte) error {
	c.w.Write(cmd)
	if err := c.w.Flush(); err != nil {
		return err
	}
	for i := range 6 {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			return err
		}
		if want := byte(':'); i == 0 && line[0] != '*' || i > 0 && line[0] != want {
			return fmt.Errorf("reply line %d: %q", i, line)
		}
	}
	return nil
}
