package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/ratestore/ratestore/gateway"
	gwconfig "github.com/ratestore/ratestore/gateway/config"
)

// configFlag registers --config on fs.
func configFlag(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "config", "", "a YAML `file` of the gateway's settings, each flag by its long name (listen: 127.0.0.1:8080; a repeatable flag as a list); a flag given on the command line wins")
}

// applyConfig sets the flags of fs that the file at path sets and the
// command line does not: the command line wins. The file is judged whole
// before any flag is set, so a bad one changes nothing. It returns the
// file's upstreams, their credentials read from the environment.
func applyConfig(cmd string, fs *flag.FlagSet, path string) ([]gateway.Upstream, error) {
	if path == "" {
		return nil, nil
	}
	file, err := gwconfig.Read(path, os.Getenv)
	if err != nil {
		return nil, usagef(cmd, "%s: --config %s: %v", cmd, path, err)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, fl := range file.Flags {
		if fs.Lookup(fl.Name) == nil || fl.Name == "config" {
			return nil, usagef(cmd, "%s: --config %s: line %d: %q is not a setting of ratestore %s (its flags' long names are)", cmd, path, fl.Line, fl.Name, cmd)
		}
	}
	for _, fl := range file.Flags {
		if given[fl.Name] {
			continue
		}
		for _, v := range fl.Values {
			if err := fs.Set(fl.Name, v); err != nil {
				return nil, usagef(cmd, "%s: --config %s: line %d: %s: %v", cmd, path, fl.Line, fl.Name, err)
			}
		}
	}
	return upstreamsOf(file.Upstreams, os.Getenv), nil
}

// upstreamsOf returns the gateway's upstreams of ups, each credential read
// from its key_env.
func upstreamsOf(ups []gwconfig.Upstream, getenv func(string) string) []gateway.Upstream {
	out := make([]gateway.Upstream, len(ups))
	for i, u := range ups {
		out[i] = gateway.Upstream{
			Name: u.Name, API: u.API, URL: u.URL, Models: u.Models, Weight: u.Weight,
			APIVersion: u.APIVersion, Deployments: u.Deployments,
			Limits: gateway.UpstreamLimits{RequestsPerMinute: u.Limits.RequestsPerMinute, TokensPerMinute: u.Limits.TokensPerMinute, MaxConcurrent: int(u.Limits.MaxConcurrent)},
		}
		if u.KeyEnv != "" {
			out[i].Key = getenv(u.KeyEnv)
		}
	}
	return out
}

// reloadFunc reloads a gateway's configuration, and returns how many
// upstreams and priced models it has.
type reloadFunc func() (upstreams, models int, err error)

// reloader is what SIGHUP (and POST /admin/config/reload) does to g: read
// the --config file at path again and apply its upstreams, then the price
// file again. A file that does not parse, or whose upstreams are not
// valid, changes nothing; its other settings take effect at the next
// start. Without --config, the prices alone are read again.
func reloader(g *gateway.Gateway, path string) reloadFunc {
	return func() (int, int, error) {
		ups := 0
		if path != "" {
			file, err := gwconfig.Read(path, os.Getenv)
			if err != nil {
				return 0, 0, fmt.Errorf("--config %s: %w", path, err)
			}
			if err := g.SetUpstreams(upstreamsOf(file.Upstreams, os.Getenv)); err != nil {
				return 0, 0, fmt.Errorf("--config %s: %w", path, err)
			}
			ups = len(file.Upstreams)
		}
		n, err := g.ReloadPrices()
		return ups, n, err
	}
}

// configReload is reload as POST /admin/config/reload's, which only a
// gateway given --config (path) has: nil without.
func configReload(reload reloadFunc, path string) reloadFunc {
	if path == "" {
		return nil
	}
	return reload
}
