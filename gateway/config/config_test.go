package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func env(vars ...string) func(string) string {
	return func(k string) string {
		for i := 0; i+1 < len(vars); i += 2 {
			if vars[i] == k {
				return vars[i+1]
			}
		}
		return ""
	}
}

const good = `# the gateway of the README
listen: 127.0.0.1:8080
rps: 5
shadow: true
upstream: ["https://api.openai.com", "/v1/messages=https://api.anthropic.com"]
upstreams:
  - name: openai-a
    api: openai
    url: https://api.openai.com
    key_env: OPENAI_KEY_A
    models: ["gpt-4o*", "gpt-4.1*"]
    limits: {requests_per_minute: 5000, tokens_per_minute: 800000, max_concurrent: 200}
    weight: 2
  - name: azure-east
    api: azure-openai
    url: https://east.example.openai.azure.com
    key_env: AZURE_EAST_KEY
    api_version: "2024-10-21"
    deployments: {gpt-4o: gpt4o-prod, gpt-4o-mini: mini}
    limits: {tokens_per_minute: 450000}
`

// TestParse: every flag as written, in order, and every upstream with its
// fields and defaults.
func TestParse(t *testing.T) {
	f, err := Parse([]byte(good), env("OPENAI_KEY_A", "sk-a", "AZURE_EAST_KEY", "az"))
	require.NoError(t, err)
	require.Equal(t, []Flag{
		{Name: "listen", Values: []string{"127.0.0.1:8080"}, Line: 2},
		{Name: "rps", Values: []string{"5"}, Line: 3},
		{Name: "shadow", Values: []string{"true"}, Line: 4},
		{Name: "upstream", Values: []string{"https://api.openai.com", "/v1/messages=https://api.anthropic.com"}, Line: 5},
	}, f.Flags)
	require.Len(t, f.Upstreams, 2)
	a, z := f.Upstreams[0], f.Upstreams[1]
	require.Equal(t, "openai-a", a.Name)
	require.Equal(t, OpenAI, a.API)
	require.Equal(t, "https://api.openai.com", a.URL.String())
	require.Equal(t, []string{"gpt-4o*", "gpt-4.1*"}, a.Models)
	require.Equal(t, Limits{RequestsPerMinute: 5000, TokensPerMinute: 800000, MaxConcurrent: 200}, a.Limits)
	require.Equal(t, 2, a.Weight)
	require.Equal(t, 7, a.Line)
	require.Equal(t, AzureOpenAI, z.API)
	require.Equal(t, 1, z.Weight, "the default weight")
	require.Equal(t, "2024-10-21", z.APIVersion)
	require.Equal(t, map[string]string{"gpt-4o": "gpt4o-prod", "gpt-4o-mini": "mini"}, z.Deployments)
	require.Nil(t, z.Models, "every model of its deployments")

	f, err = Parse(nil, nil)
	require.NoError(t, err)
	require.Equal(t, &File{}, f, "an empty file sets nothing")
}

// TestParseRefuses: each fault gets an error matching ErrInvalid that
// names its line and what is wrong.
func TestParseRefuses(t *testing.T) {
	up := "upstreams:\n  - name: a\n    api: openai\n    url: https://x.example\n"
	for _, c := range []struct {
		name, file string
		line       int
		msg        string
	}{
		{"not a mapping", "- a\n- b\n", 1, "not a mapping"},
		{"two documents", "listen: a\n---\nlisten: b\n", 2, "more than one YAML document"},
		{"a key twice", "listen: a\nrps: 1\nlisten: b\n", 3, `"listen" is set at line 1 already`},
		{"a null flag", "listen:\n", 1, "listen: no value"},
		{"a mapping flag", "listen: {a: b}\n", 1, "want a value or a list"},
		{"an empty list", "upstream: []\n", 1, "empty list"},
		{"unknown field", up + "    colour: blue\n", 5, `unknown field "colour"`},
		{"duplicate name", up + "  - name: a\n    api: anthropic\n    url: https://y.example\n", 5, `"a": the name of the upstream at line 2 too`},
		{"unknown api", "upstreams:\n  - name: a\n    api: bedrock\n    url: https://x.example\n", 2, `api "bedrock"`},
		{"no api", "upstreams:\n  - name: a\n    url: https://x.example\n", 2, "no api"},
		{"no url", "upstreams:\n  - name: a\n    api: openai\n", 2, "no url"},
		{"no name", "upstreams:\n  - api: openai\n    url: https://x.example\n", 2, "no name"},
		{"a bad name", "upstreams:\n  - name: a b\n    api: openai\n    url: https://x.example\n", 2, "a name is 1 to 64"},
		{"deployments on openai", up + "    deployments: {gpt-4o: d}\n", 2, "Azure OpenAI's"},
		{"api_version on openai", up + "    api_version: v\n", 2, "Azure OpenAI's"},
		{"azure without api_version", "upstreams:\n  - name: a\n    api: azure-openai\n    url: https://x.example\n    deployments: {m: d}\n", 2, "needs an api_version"},
		{"azure without deployments", "upstreams:\n  - name: a\n    api: azure-openai\n    url: https://x.example\n    api_version: v\n", 2, "needs deployments"},
		{"a missing key_env", up + "    key_env: NOPE\n", 2, "key_env NOPE: the variable is not set"},
		{"a bad glob", up + "    models: [\"gpt-[\"]\n", 2, "can never match"},
		{"a glob no deployment matches", "upstreams:\n  - name: a\n    api: azure-openai\n    url: https://x.example\n    api_version: v\n    deployments: {gpt-4o: d}\n    models: [claude-*]\n", 2, `"claude-*" matches none of its deployments`},
		{"a url with a password", "upstreams:\n  - name: a\n    api: openai\n    url: https://u:hunter2@x.example\n", 4, "user or password"},
		{"an ftp url", "upstreams:\n  - name: a\n    api: openai\n    url: ftp://x.example\n", 4, "http:// or https://"},
		{"a negative limit", up + "    limits: {tokens_per_minute: -1}\n", 5, "want a whole number from 0"},
		{"a fractional limit", up + "    limits: {tokens_per_minute: 1.5}\n", 5, "want a whole number"},
		{"an unknown limit", up + "    limits: {tokens_per_day: 1}\n", 5, `unknown field "tokens_per_day"`},
		{"weight 0", up + "    weight: 0\n", 5, "weight 0: want at least 1"},
		{"upstreams not a list", "upstreams: {a: b}\n", 1, "want a list"},
		{"an alias", "a: &x v\nb: *x\n", 2, "b: want a value"},
		{"not YAML", "listen: [\n", 0, "yaml:"},
	} {
		_, err := Parse([]byte(c.file), env("OPENAI_KEY_A", "k"))
		require.ErrorIs(t, err, ErrInvalid, c.name)
		var fe *Error
		require.True(t, errors.As(err, &fe), c.name)
		require.Equal(t, c.line, fe.Line, "%s: %v", c.name, err)
		require.Contains(t, err.Error(), c.msg, c.name)
		require.NotContains(t, err.Error(), "hunter2", c.name)
	}
}

// TestRead: a file too large is refused before it is parsed, a missing
// one names its path.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "gw.yaml")
	require.NoError(t, os.WriteFile(p, []byte("listen: 127.0.0.1:1\n"), 0o600))
	f, err := Read(p, nil)
	require.NoError(t, err)
	require.Equal(t, "listen", f.Flags[0].Name)

	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, []byte("# "+strings.Repeat("x", MaxSize)+"\n"), 0o600))
	_, err = Read(big, nil)
	require.ErrorIs(t, err, ErrInvalid)
	require.Contains(t, err.Error(), "larger than")

	_, err = Read(filepath.Join(dir, "none.yaml"), nil)
	require.ErrorIs(t, err, os.ErrNotExist)
}

// FuzzParse: no input panics, and every refusal matches ErrInvalid.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("listen: a\nlisten: b\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := Parse(b, env("OPENAI_KEY_A", "k", "AZURE_EAST_KEY", "k"))
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("%q: %v does not match ErrInvalid", b, err)
		}
	})
}
