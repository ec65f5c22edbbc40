// Package server serves limiters to programs in other languages: an HTTP
// API (POST /v1/allow) and a RESP listener that speaks redis-cell's
// CL.THROTTLE, so that a Redis client library that calls redis-cell calls
// ratestore unchanged.
//
// Both answer every request with one decision of a Limiter, as
// Limiter.AllowN does. The limiters are a ratestore.DB's, to share one
// embedded store with the programs on its machine, where the DB's
// durability applies (in Sync mode a decision that takes something is on
// disk before its reply is sent); or a redisstore.DB's, so that several
// servers on several machines share one set of limits in Redis.
//
// A Server checks a token when it has one: "Authorization: Bearer TOKEN"
// over HTTP, AUTH TOKEN over RESP, compared in constant time. Package
// server does not choose addresses: the ratestore serve command listens on
// loopback unless told otherwise, and refuses another address without a
// token.
package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net"
	"sync"

	"github.com/ratestore/ratestore/backend"
	"github.com/ratestore/ratestore/strategies"
)

// Options configures a Server.
type Options struct {
	// Token, when not empty, is required of every request: the bearer
	// token of an HTTP request, the password of RESP's AUTH. Only its hash
	// is kept.
	Token string
	// Logger receives the errors of connections; nil: slog.Default().
	Logger *slog.Logger
}

// Server answers decisions with the limiters of one store. Its methods may
// be called concurrently.
type Server struct {
	db       backend.Store
	token    [sha256.Size]byte
	hasToken bool
	log      *slog.Logger

	mu       sync.Mutex
	limiters map[limiterKey]limiter    // handles made for requests, at most maxLimiters
	conns    map[net.Conn]struct{}     // RESP connections open, closed by Close
	lns      map[net.Listener]struct{} // RESP listeners, closed by Close
	closed   bool
	wg       sync.WaitGroup // RESP connections being served
}

// limiter is the limiter handle of the Server's store.
type limiter = backend.Limiter

// New returns a Server of the limiters of db: any backend meeting the
// backend contract (backend.Store), a *ratestore.DB or a
// *redisstore.DB.
func New(db backend.Store, opts Options) *Server {
	s := &Server{
		db:       db,
		log:      opts.Logger,
		limiters: map[limiterKey]limiter{},
		conns:    map[net.Conn]struct{}{},
		lns:      map[net.Listener]struct{}{},
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.Token != "" {
		s.token, s.hasToken = sha256.Sum256([]byte(opts.Token)), true
	}
	return s
}

// authorized reports whether token is the Server's token, or the Server
// has none. Hashing both sides makes the comparison's time independent of
// the token's length as well as its bytes.
func (s *Server) authorized(token string) bool {
	if !s.hasToken {
		return true
	}
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], s.token[:]) == 1
}

// limiterKey names a limiter handle: its name and its configuration, as
// comparable text.
type limiterKey struct{ name, config string }

// maxLimiters bounds the handles kept for reuse: a client that sends a new
// configuration with every request gets a new handle each time, which costs
// a Prepare, rather than growing the Server's memory.
const maxLimiters = 4096

// limiter returns the handle of s under name, config being s's canonical
// text, made once and kept while there is room.
func (s *Server) limiter(name, config string, st strategies.Strategy) (limiter, error) {
	k := limiterKey{name, config}
	s.mu.Lock()
	l := s.limiters[k]
	s.mu.Unlock()
	if l != nil {
		return l, nil
	}
	l, err := s.db.Handle(name, st)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.limiters) < maxLimiters {
		s.limiters[k] = l
	}
	s.mu.Unlock()
	return l, nil
}

// Close closes the RESP listeners and connections the Server serves, and
// waits for their handlers to return. It does not close the store, nor
// HTTP servers using Handler (http.Server.Shutdown does that).
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
