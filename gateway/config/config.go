// Package config reads the gateway's configuration file (ratestore gateway
// --config FILE): YAML holding the gateway's flags by their long names and
// the list of its upstreams.
//
// A file is judged whole: the first thing wrong in it is an error that
// names its line and matches ErrInvalid, and nothing of the file is used,
// so that a bad edit never half-applies. What the file's flags mean is the
// command's to check (File.Flags are names and values as written); what
// an upstream is, is checked here.
//
//	listen: 127.0.0.1:8080
//	prices: /etc/ratestore/prices.json
//	upstream: ["https://api.openai.com"]   # a repeatable flag: a list
//	upstreams:
//	  - name: openai-a
//	    api: openai
//	    url: https://api.openai.com
//	    key_env: OPENAI_KEY_A
//	    models: ["gpt-4o*"]
//	    limits: {requests_per_minute: 5000, tokens_per_minute: 800000}
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/ratestore/ratestore/backend"
)

// ErrInvalid is matched by every error about a file that cannot be used.
var ErrInvalid = backend.ErrInvalid

// MaxSize is the largest file Read accepts: a configuration is a few
// kilobytes, and the bound keeps a wrong path (a log, a disk image) from
// being read whole.
const MaxSize = 1 << 20

// File is a configuration file as read.
type File struct {
	// Flags are the file's settings of the command's flags, in the order
	// written: every top-level key but upstreams.
	Flags []Flag
	// Upstreams are the file's upstreams, checked (see Upstream).
	Upstreams []Upstream
}

// Flag is one flag set by the file: its long name and its values, one for
// a scalar, one per item for a list (a repeatable flag, as --upstream).
type Flag struct {
	Name   string
	Values []string
	Line   int
}

// Error is a fault in a file, at a line (0: the file as a whole).
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line == 0 {
		return "config: " + e.Msg + ": " + ErrInvalid.Error()
	}
	return fmt.Sprintf("config: line %d: %s: %s", e.Line, e.Msg, ErrInvalid)
}

// Unwrap returns ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

func errorAt(n *yaml.Node, format string, args ...any) error {
	return &Error{Line: n.Line, Msg: fmt.Sprintf(format, args...)}
}

// Read reads and parses the file at path (see Parse).
func Read(path string, getenv func(string) string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	if len(b) > MaxSize {
		return nil, &Error{Msg: fmt.Sprintf("%s is larger than %d bytes", path, MaxSize)}
	}
	return Parse(b, getenv)
}

// Parse parses a configuration file. getenv reads the environment (nil:
// os.Getenv): an upstream's key_env must name a variable that is set.
func Parse(b []byte, getenv func(string) string) (*File, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &File{}, nil // an empty file sets nothing
		}
		return nil, &Error{Msg: err.Error()} // yaml's message names the line
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, &Error{Line: more.Line, Msg: "more than one YAML document"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, errorAt(root, "the file is not a mapping of settings")
	}
	kvs, err := entries(root)
	if err != nil {
		return nil, err
	}
	f := &File{}
	for _, e := range kvs {
		name, k, v := e.name, e.k, e.v
		if name == "upstreams" {
			if f.Upstreams, err = upstreams(v, getenv); err != nil {
				return nil, err
			}
			continue
		}
		fl, err := flagOf(name, k, v)
		if err != nil {
			return nil, err
		}
		f.Flags = append(f.Flags, fl)
	}
	return f, nil
}

// entry is one key of a mapping and its value.
type entry struct {
	name string
	k, v *yaml.Node
}

// entries are the keys of mapping n and their values, in order: names,
// each once (YAML forbids a key twice, and a second one must not
// silently win).
func entries(n *yaml.Node) ([]entry, error) {
	es := make([]entry, 0, len(n.Content)/2)
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name, err := keyOf(k)
		if err != nil {
			return nil, err
		}
		if line, ok := seen[name]; ok {
			return nil, errorAt(k, "%q is set at line %d already", name, line)
		}
		seen[name] = k.Line
		es = append(es, entry{name, k, v})
	}
	return es, nil
}

// keyOf is the name of a mapping's key k: a plain string.
func keyOf(k *yaml.Node) (string, error) {
	if k.Kind != yaml.ScalarNode || k.Tag != "!!str" || k.Value == "" {
		return "", errorAt(k, "a key that is not a name")
	}
	return k.Value, nil
}

// flagOf is the setting of flag name by value v: a scalar, or a list of
// scalars for a repeatable flag.
func flagOf(name string, k, v *yaml.Node) (Flag, error) {
	fl := Flag{Name: name, Line: k.Line}
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return Flag{}, errorAt(v, "%s: no value", name)
		}
		fl.Values = []string{v.Value}
	case yaml.SequenceNode:
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return Flag{}, errorAt(item, "%s: a list item that is not a value", name)
			}
			fl.Values = append(fl.Values, item.Value)
		}
		if len(fl.Values) == 0 {
			return Flag{}, errorAt(v, "%s: an empty list", name)
		}
	default:
		return Flag{}, errorAt(v, "%s: want a value or a list of values", name)
	}
	return fl, nil
}
