package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/ratestore/ratestore/strategies"
)

// The RESP side: RESP2, as redis-cli and the Redis client libraries speak
// it, with the commands a client of redis-cell needs.
//
//	CL.THROTTLE key max_burst count period [quantity]
//	    redis-cell's command and reply (see throttle)
//	AUTH [username] token
//	PING [message], ECHO message, QUIT
//	SELECT 0, CLIENT ..., COMMAND ...: answered so that client libraries
//	    that send them on connecting go on (OK, OK, an empty list)
//
// Commands come as arrays of bulk strings, or inline (a line of words, as
// typed into telnet). A malformed request gets "-ERR Protocol error" and the
// connection is closed, as Redis does; an unknown command gets an error
// and the connection goes on.

// Bounds on what a client may send: redis-cell's commands are short, and
// a key is at most backend.MaxKeyLen bytes.
const (
	maxArgs    = 16
	maxBulkLen = 4096
	maxInline  = 4096
)

// throttleLimiter is the limiter name the states of CL.THROTTLE keys live
// under: like redis-cell, which stores a key's TAT and takes the
// configuration from each call, every configuration shares it.
const throttleLimiter = "cl.throttle"

// errProtocol is a request that is not RESP.
//
//lint:ignore ST1005 Redis's own words, which clients match
var errProtocol = errors.New("Protocol error")

// ServeRESP accepts connections on ln and serves each until the client
// closes it or the Server is closed. It returns nil once Close closed ln,
// or ln's error.
func (s *Server) ServeRESP(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			delete(s.lns, ln)
			s.mu.Unlock()
			if closed {
				return nil
			}
			return err
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

// serveConn answers the commands of one connection in order. Replies are
// flushed once no command is waiting to be read, so a pipelining client
// gets them in few writes.
func (s *Server) serveConn(c net.Conn) {
	r := bufio.NewReaderSize(c, 4096)
	w := bufio.NewWriterSize(c, 4096)
	cn := &conn{s: s, authed: !s.hasToken}
	for {
		args, err := readCommand(r)
		if err != nil {
			if errors.Is(err, errProtocol) {
				fmt.Fprintf(w, "-ERR %v\r\n", err)
				w.Flush()
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("server: resp: read", "remote", c.RemoteAddr(), "err", err)
			}
			return
		}
		if len(args) == 0 {
			continue // an empty inline line
		}
		quit := cn.exec(w, args)
		if r.Buffered() == 0 || quit {
			if err := w.Flush(); err != nil || quit {
				return
			}
		}
	}
}

// readCommand reads one command: an array of bulk strings, or an inline
// line of words.
func readCommand(r *bufio.Reader) ([]string, error) {
	b, err := r.Peek(1)
	if err != nil {
		return nil, err
	}
	if b[0] != '*' {
		line, err := readLine(r, maxInline)
		if err != nil {
			return nil, err
		}
		return strings.Fields(line), nil
	}
	n, err := readHeader(r, '*', maxArgs)
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		size, err := readHeader(r, '$', maxBulkLen)
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		if buf[size] != '\r' || buf[size+1] != '\n' {
			return nil, fmt.Errorf("%w: expected '\\r\\n' after a bulk string", errProtocol)
		}
		args[i] = string(buf[:size])
	}
	return args, nil
}

// readHeader reads a line "<kind><n>\r\n" with 0 <= n <= limit.
func readHeader(r *bufio.Reader, kind byte, limit int) (int, error) {
	line, err := readLine(r, 32)
	if err != nil {
		return 0, err
	}
	if len(line) < 2 || line[0] != kind {
		return 0, fmt.Errorf("%w: expected '%c', got %q", errProtocol, kind, line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 || n > limit {
		what := "multibulk length"
		if kind == '$' {
			what = "bulk length"
		}
		return 0, fmt.Errorf("%w: invalid %s %q (at most %d)", errProtocol, what, line[1:], limit)
	}
	return n, nil
}

// readLine reads a line ending in "\r\n" (or "\n", inline) of at most
// limit bytes, and returns it without its end.
func readLine(r *bufio.Reader, limit int) (string, error) {
	var line []byte
	for {
		frag, err := r.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > limit+2 {
			return "", fmt.Errorf("%w: too big inline request", errProtocol)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			if len(line) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return "", err
		}
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return string(line), nil
}

// conn is the state of one RESP connection.
type conn struct {
	s      *Server
	authed bool
}

// exec answers one command, and reports whether the connection ends
// (QUIT).
func (cn *conn) exec(w *bufio.Writer, args []string) (quit bool) {
	name := strings.ToUpper(args[0])
	if !cn.authed && name != "AUTH" && name != "QUIT" {
		w.WriteString("-NOAUTH Authentication required.\r\n")
		return false
	}
	switch name {
	case "CL.THROTTLE":
		cn.s.throttle(w, args[1:])
	case "AUTH":
		cn.auth(w, args[1:])
	case "PING":
		switch len(args) {
		case 1:
			w.WriteString("+PONG\r\n")
		case 2:
			writeBulk(w, args[1])
		default:
			wrongArgs(w, args[0])
		}
	case "ECHO":
		if len(args) != 2 {
			wrongArgs(w, args[0])
			break
		}
		writeBulk(w, args[1])
	case "QUIT":
		w.WriteString("+OK\r\n")
		return true
	case "SELECT":
		if len(args) != 2 || args[1] != "0" {
			w.WriteString("-ERR DB index is out of range\r\n")
			break
		}
		w.WriteString("+OK\r\n")
	case "CLIENT":
		w.WriteString("+OK\r\n")
	case "COMMAND":
		w.WriteString("*0\r\n")
	default:
		fmt.Fprintf(w, "-ERR unknown command '%s', with args beginning with: %s\r\n", clean(args[0]), quoteArgs(args[1:]))
	}
	return false
}

// auth answers AUTH [username] password. The username, if any, must be
// Redis's "default": the token is the one password there is.
func (cn *conn) auth(w *bufio.Writer, args []string) {
	if len(args) < 1 || len(args) > 2 {
		wrongArgs(w, "auth")
		return
	}
	if !cn.s.hasToken {
		w.WriteString("-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n")
		return
	}
	if len(args) == 2 && args[0] != "default" || !cn.s.authorized(args[len(args)-1]) {
		w.WriteString("-WRONGPASS invalid username-password pair or user is disabled.\r\n")
		return
	}
	cn.authed = true
	w.WriteString("+OK\r\n")
}

// throttle answers CL.THROTTLE key max_burst count period [quantity] as
// redis-cell does: a GCRA of max_burst+1 calls at once, refilling count
// per period seconds, taking quantity (1 by default; 0 peeks). The reply
// is five integers:
//
//	1 if the call was limited, else 0
//	the limit: max_burst + 1
//	what remains after the call
//	seconds until the same call would be allowed; -1 when it was allowed,
//	    or when it never can be (quantity > limit)
//	seconds until the key is back to its full limit
//
// Durations are whole seconds, rounded up when they hold a millisecond
// or more beyond them (redis-cell's rounding). The emission interval is
// period/count truncated to the nanosecond, as redis-cell computes it. A
// key's state is its TAT alone, shared by every configuration it is
// called with, as in redis-cell: a call under another configuration reads
// the same TAT. Two differences: the reset is never negative (redis-cell
// answers a negative one for a refused call on a key idle for a while), and
// a burst that would take over 100 years to refill refills in 100 years
// (see strategies.GCRA).
func (s *Server) throttle(w *bufio.Writer, args []string) {
	if len(args) != 4 && len(args) != 5 {
		w.WriteString("-ERR Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n")
		return
	}
	var nums [4]int64
	nums[3] = 1
	for i, a := range args[1:] {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			fmt.Fprintf(w, "-ERR Couldn't parse as integer: %s\r\n", clean(a))
			return
		}
		nums[i] = n
	}
	burst, count, period, quantity := nums[0], nums[1], nums[2], nums[3]
	switch {
	case burst < 0 || quantity < 0 || count < 0 || period < 0:
		w.WriteString("-ERR max_burst, count, period and quantity must not be negative\r\n")
		return
	case period > math.MaxInt64/int64(time.Second):
		w.WriteString("-ERR period is too long\r\n")
		return
	}
	var t int64
	if count > 0 {
		t = period * int64(time.Second) / count
	}
	if t == 0 {
		w.WriteString("-ERR Zero rates are not supported\r\n")
		return
	}
	g := strategies.GCRA{Rate: float64(time.Second) / float64(t), Burst: min(burst, math.MaxInt64-1) + 1}
	l, err := s.limiter(throttleLimiter, fmt.Sprintf("%d/%d", g.Burst, t), g)
	if err != nil {
		fmt.Fprintf(w, "-ERR %s\r\n", clean(err.Error()))
		return
	}
	r, err := l.AllowN(context.Background(), args[0], quantity)
	if err != nil {
		fmt.Fprintf(w, "-ERR %s\r\n", clean(err.Error()))
		return
	}
	limited, retry := 0, int64(-1)
	if !r.Allowed {
		limited = 1
		if r.RetryAfter > 0 {
			retry = cellSeconds(r.RetryAfter)
		}
	}
	fmt.Fprintf(w, "*5\r\n:%d\r\n:%d\r\n:%d\r\n:%d\r\n:%d\r\n", limited, r.Limit, r.Remaining, retry, cellSeconds(r.ResetAfter))
}

// cellSeconds is d in whole seconds, plus one when what is left holds a
// millisecond or more: redis-cell's rounding of its replies.
func cellSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second >= time.Millisecond {
		s++
	}
	return s
}

func writeBulk(w *bufio.Writer, s string) {
	fmt.Fprintf(w, "$%d\r\n%s\r\n", len(s), s)
}

func wrongArgs(w *bufio.Writer, cmd string) {
	fmt.Fprintf(w, "-ERR wrong number of arguments for '%s' command\r\n", strings.ToLower(clean(cmd)))
}

// clean makes s safe inside a simple-string reply: no line breaks, and
// short.
func clean(s string) string {
	if len(s) > 128 {
		s = s[:128] + "..."
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// quoteArgs shows the first arguments of an unknown command, as Redis does.
func quoteArgs(args []string) string {
	var b strings.Builder
	for i, a := range args {
		if i == 3 {
			break
		}
		fmt.Fprintf(&b, "'%s' ", clean(a))
	}
	return b.String()
}
