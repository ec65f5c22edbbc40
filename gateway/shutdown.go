package gateway

import (
	"context"
	"errors"
	"sync"
)

// errAborted is the cause of the upstream requests that Abort ended.
var errAborted = errors.New("gateway: aborted: the gateway is shutting down")

// activity counts the requests a Gateway is serving, for Wait, and ends
// their upstream requests on Abort. It does not use a sync.WaitGroup,
// whose Wait may not run while the count rises from zero: a server may
// still hand the Gateway a request while its owner waits.
type activity struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0

	// aborted ends with Abort; every upstream request is ended with it.
	aborted context.Context
	abort   context.CancelCauseFunc
}

func newActivity() *activity {
	a := &activity{}
	a.aborted, a.abort = context.WithCancelCause(context.Background())
	return a
}

func (a *activity) begin() {
	a.mu.Lock()
	if a.n == 0 {
		a.idle = make(chan struct{})
	}
	a.n++
	a.mu.Unlock()
}

func (a *activity) end() {
	a.mu.Lock()
	if a.n--; a.n == 0 {
		close(a.idle)
		a.idle = nil
	}
	a.mu.Unlock()
}

// watch ends an upstream request with cancel when Abort is called, until
// stop is called.
func (a *activity) watch(cancel context.CancelCauseFunc) (stop func() bool) {
	if a.aborted.Err() != nil {
		// Aborted already: AfterFunc would cancel in a goroutine of its
		// own, after the request may have gone out.
		cancel(context.Cause(a.aborted))
		return func() bool { return false }
	}
	return context.AfterFunc(a.aborted, func() { cancel(context.Cause(a.aborted)) })
}

// Wait waits until g serves no request, every admission it made finished
// and its usage recorded, or until ctx ends; it returns context.Cause(ctx)
// in that case.
//
// http.Server.Shutdown waits for the connections, not for their handlers,
// and a request whose caller is gone may still be reading its upstream
// response for its usage (see Options.DrainTimeout). A graceful shutdown
// shuts the server down, then, if that times out, closes it and calls
// Abort, and always waits for the Gateway before closing the database, so
// that the last usage is recorded and none is written to a closed one:
//
//	if err := srv.Shutdown(ctx); err != nil {
//		srv.Close()
//		g.Abort()
//	}
//	g.Wait(ctx2) // a short bound: after Abort, the handlers only record usage
//	db.Close()
func (g *Gateway) Wait(ctx context.Context) error {
	g.active.mu.Lock()
	idle := g.active.idle
	g.active.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Abort ends the upstream request of every request g is serving, and of
// every one it serves later (which fails with 502): for a shutdown that has
// waited long enough. Each request still finishes its admission, charged
// the usage read so far or its estimate (logged as estimated), as when an
// upstream breaks off; Wait waits for that.
func (g *Gateway) Abort() {
	g.active.abort(errAborted)
}
