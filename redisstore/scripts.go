package redisstore

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"
)

// scriptCall is one run of a script: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
}

// runScripts runs s once for each of calls and returns their commands,
// holding each reply or error: a lone call by itself (EVALSHA, then EVAL
// if Redis lacks the script), more as one pipeline, which a Cluster client
// sends to each node in parallel.
func (db *DB) runScripts(ctx context.Context, s *redis.Script, calls []scriptCall) []*redis.Cmd {
	if len(calls) == 1 {
		return []*redis.Cmd{s.Run(ctx, db.client, calls[0].keys, calls[0].args...)}
	}
	cmds := db.pipeScripts(ctx, calls, s.EvalSha)
	var again []int
	for i, c := range cmds {
		if err := c.Err(); err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 { // Redis lost its scripts (a restart): send the text
		redo := make([]scriptCall, len(again))
		for j, i := range again {
			redo[j] = calls[i]
		}
		for j, c := range db.pipeScripts(ctx, redo, s.Eval) {
			cmds[again[j]] = c
		}
	}
	return cmds
}

// pipeScripts sends calls as one pipeline of eval (EvalSha or Eval).
func (db *DB) pipeScripts(ctx context.Context, calls []scriptCall, eval func(context.Context, redis.Scripter, []string, ...any) *redis.Cmd) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = db.client.Pipelined(ctx, func(p redis.Pipeliner) error { // each command holds its error
		for i, c := range calls {
			cmds[i] = eval(ctx, p, c.keys, c.args...)
		}
		return nil
	})
	return cmds
}

// bySlot splits the Redis keys rks into the groups a script may use
// together: all of them on one node, one group per hash tag on a Cluster.
func (db *DB) bySlot(rks []string) map[string][]string {
	groups := map[string][]string{}
	for _, rk := range rks {
		t := ""
		if db.cluster {
			t = slotTag(rk)
		}
		groups[t] = append(groups[t], rk)
	}
	return groups
}
