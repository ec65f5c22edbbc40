package pricing

import (
	"bytes"
	_ "embed"
	"slices"
	"strings"
	"sync"
)

// Table maps model names to prices. It is immutable once built (by Parse,
// Default or With), so one Table is safe to share between goroutines and to
// swap whole on a reload. The zero Table and a nil *Table are empty.
type Table struct {
	prices map[string]Price
	names  []string // sorted

	// Lookup's indexes, built once: lowercased bare names and families
	// (see Lookup) to the table's names, best first.
	bare   map[string][]string
	family map[string][]string
}

//go:embed default_prices.json
var defaultJSON []byte

var defaultTable = sync.OnceValue(func() *Table {
	t, err := Parse(bytes.NewReader(defaultJSON))
	if err != nil {
		panic("pricing: the embedded default_prices.json is invalid: " + err.Error())
	}
	return t
})

// Default returns the built-in table, from default_prices.json in this
// package: LiteLLM's prices for the common OpenAI, Anthropic and Gemini
// models, with the date they were taken and their source recorded in the
// file's "sample_spec" entry. Every call returns the same Table.
func Default() *Table { return defaultTable() }

// newTable builds a Table and its lookup indexes over prices, which it keeps.
func newTable(prices map[string]Price) *Table {
	t := &Table{
		prices: prices,
		names:  make([]string, 0, len(prices)),
		bare:   make(map[string][]string),
		family: make(map[string][]string),
	}
	for name := range prices {
		t.names = append(t.names, name)
	}
	slices.Sort(t.names)
	for _, name := range t.names {
		b := bareName(strings.ToLower(name))
		t.bare[b] = append(t.bare[b], name)
		if f := familyName(b); f != b {
			t.family[f] = append(t.family[f], name)
		}
	}
	for _, idx := range []map[string][]string{t.bare, t.family} {
		for _, names := range idx {
			slices.SortStableFunc(names, preferUnprefixed)
		}
	}
	return t
}

// preferUnprefixed orders names without a provider prefix first, keeping
// the sorted order otherwise: "gpt-4o" before "azure/gpt-4o".
func preferUnprefixed(a, b string) int {
	pa, pb := strings.Contains(a, "/"), strings.Contains(b, "/")
	switch {
	case pa == pb:
		return 0
	case pb:
		return -1
	default:
		return 1
	}
}

// With returns a table holding t's entries and over's, over's replacing
// t's of the same name (exactly the same: names are compared as written):
// an operator's --prices file over the default. Neither table changes.
func (t *Table) With(over *Table) *Table {
	m := make(map[string]Price, t.Len()+over.Len())
	if t != nil {
		for name, p := range t.prices {
			m[name] = p
		}
	}
	if over != nil {
		for name, p := range over.prices {
			m[name] = p
		}
	}
	return newTable(m)
}

// Len returns the number of models priced.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.prices)
}

// Models returns the names of the models priced, sorted, in a new slice.
func (t *Table) Models() []string {
	if t == nil {
		return nil
	}
	return slices.Clone(t.names)
}
