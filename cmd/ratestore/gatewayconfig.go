package main

import (
	"flag"
	"os"

	gwconfig "github.com/ratestore/ratestore/gateway/config"
)

// configFlag registers --config on fs.
func configFlag(fs *flag.FlagSet, path *string) {
	fs.StringVar(path, "config", "", "a YAML `file` of the gateway's settings, each flag by its long name (listen: 127.0.0.1:8080; a repeatable flag as a list); a flag given on the command line wins")
}

// applyConfig sets the flags of fs that the file at path sets and the
// command line does not: the command line wins. The file is judged whole
// before any flag is set, so a bad one changes nothing.
func applyConfig(cmd string, fs *flag.FlagSet, path string) error {
	if path == "" {
		return nil
	}
	file, err := gwconfig.Read(path, os.Getenv)
	if err != nil {
		return usagef(cmd, "%s: --config %s: %v", cmd, path, err)
	}
	if len(file.Upstreams) > 0 {
		return usagef(cmd, "%s: --config %s: line %d: upstreams: pools of upstreams are not served by this version; route with upstream: [PREFIX=URL, ...]", cmd, path, file.Upstreams[0].Line)
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, fl := range file.Flags {
		if fs.Lookup(fl.Name) == nil || fl.Name == "config" {
			return usagef(cmd, "%s: --config %s: line %d: %q is not a setting of ratestore %s (its flags' long names are)", cmd, path, fl.Line, fl.Name, cmd)
		}
	}
	for _, fl := range file.Flags {
		if given[fl.Name] {
			continue
		}
		for _, v := range fl.Values {
			if err := fs.Set(fl.Name, v); err != nil {
				return usagef(cmd, "%s: --config %s: line %d: %s: %v", cmd, path, fl.Line, fl.Name, err)
			}
		}
	}
	return nil
}
