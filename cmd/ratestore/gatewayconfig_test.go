package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGatewayConfig: the gateway takes its flags from --config by their
// long names, a repeatable one as a list, and a flag given on the command
// line wins over the file's.
func TestGatewayConfig(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`# settings of the gateway
listen: 127.0.0.1:1          # the command line's --listen wins
upstream: ["http://127.0.0.1:9", "/v1/messages=http://127.0.0.2:9"]
rps: 7
burst: 20
durability: async
stats-path: /usage
`), 0o600))
	g := e.startGateway("--config", path, "--burst", "9")
	require.NotEqual(t, "127.0.0.1:1", g.out.Listen)
	require.Equal(t, "http://127.0.0.1:9", g.out.Upstream)
	require.Equal(t, []routeOut{{Prefix: "/v1/messages", Upstream: "http://127.0.0.2:9"}}, g.out.Routes)
	require.EqualValues(t, 7, g.out.RPS)
	require.EqualValues(t, 9, g.out.Burst, "the command line's")
	require.Equal(t, "async", g.out.Durability)
	require.Equal(t, "/usage", g.out.StatsPath)
	require.Zero(t, g.stop())
}

// TestGatewayConfigErrors: a bad file is refused whole, naming its line,
// before anything is opened.
func TestGatewayConfigErrors(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	for _, c := range []struct{ name, file, msg string }{
		{"unknown setting", "upstream: [\"http://x\"]\ncolour: blue\n", `line 2: "colour" is not a setting of ratestore gateway`},
		{"bad value", "upstream: [\"http://x\"]\nrps: fast\n", "line 2: rps:"},
		{"config in config", "config: other.yaml\n", `line 1: "config" is not a setting`},
		{"a key twice", "rps: 1\nrps: 2\n", `line 2: "rps" is set at line 1 already`},
		{"not YAML", "rps: [\n", "yaml:"},
		{"a bad upstream", "upstreams:\n  - name: a\n    api: bedrock\n    url: https://x.example\n", `line 2: upstream "a": api "bedrock"`},
	} {
		path := filepath.Join(dir, c.name+".yaml")
		require.NoError(t, os.WriteFile(path, []byte(c.file), 0o600))
		r := e.run("gateway", "--config", path)
		require.Equal(t, exitUsage, r.code, "%s: %s", c.name, r.stderr)
		require.Contains(t, r.stderr, c.msg, c.name)
	}
	r := e.run("gateway", "--config", filepath.Join(dir, "none.yaml"))
	require.Equal(t, exitUsage, r.code)
	require.Contains(t, r.stderr, "no such file")
	e.requireNoDB()
}
