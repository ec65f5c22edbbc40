package admin

import (
	"context"
	"net/netip"
)

// Actors of the calls that changes are made by, as the audit log names
// them: the admin token as a bearer token, the command line on a
// database it opened, and a console session (SessionActor).
const (
	ActorToken = "admin-token"
	ActorCLI   = "cli"
)

// SessionActor is the actor of a console session whose id hashes to
// hash: "session:" and the first 8 hex digits of the hash, which name the
// session in the log without being a credential.
func SessionActor(hashHex string) string {
	return "session:" + hashHex[:min(8, len(hashHex))]
}

type actorKey struct{}

// WithActor returns ctx for a call made by actor: whatever authenticates
// the calls of an API (package console) says who made them.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// ActorOf returns the actor of ctx (WithActor); "" when none was set.
func ActorOf(ctx context.Context) string {
	a, _ := ctx.Value(actorKey{}).(string)
	return a
}

type clientKey struct{}

// WithClient returns ctx for a call from the client address addr: the
// peer's, or behind a trusted proxy the address it forwarded for (package
// console decides which), for the log and the audit log to name. The zero
// Addr is a peer without one (a Unix socket).
func WithClient(ctx context.Context, addr netip.Addr) context.Context {
	return context.WithValue(ctx, clientKey{}, addr)
}

// ClientOf returns the client address of ctx (WithClient); the zero Addr
// when none was set.
func ClientOf(ctx context.Context) netip.Addr {
	a, _ := ctx.Value(clientKey{}).(netip.Addr)
	return a
}
