package pricing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxFileSize bounds the price file Parse reads, in bytes. LiteLLM's whole
// file is under 2 MiB; the bound leaves it room to grow and refuses a
// stream that never ends.
const MaxFileSize = 64 << 20

// MaxPrice is the largest per-token price Parse accepts, in pico-dollars:
// $1 a token, over a thousand times the dearest model's. A larger one is a typo
// (a price per million tokens, say) that would bill a fortune.
const MaxPrice = 1_000_000_000_000

// maxDepth bounds the nesting of the values Parse skips over (LiteLLM's
// deepest is 3), which keeps skipValue's recursion shallow.
const maxDepth = 32

// priceField is one of LiteLLM's per-token price fields and where it goes
// in a Price; tier is nil for a field without a long-context tier.
type priceField struct {
	name       string
	base, tier func(*Price) *int64
}

var priceFields = [...]priceField{
	{"input_cost_per_token", func(p *Price) *int64 { return &p.Input }, func(p *Price) *int64 { return &p.InputAbove200k }},
	{"output_cost_per_token", func(p *Price) *int64 { return &p.Output }, func(p *Price) *int64 { return &p.OutputAbove200k }},
	{"cache_read_input_token_cost", func(p *Price) *int64 { return &p.CacheRead }, func(p *Price) *int64 { return &p.CacheReadAbove200k }},
	{"cache_creation_input_token_cost", func(p *Price) *int64 { return &p.CacheWrite }, func(p *Price) *int64 { return &p.CacheWriteAbove200k }},
	{"cache_creation_input_token_cost_above_1hr", func(p *Price) *int64 { return &p.CacheWrite1h }, func(p *Price) *int64 { return &p.CacheWrite1hAbove200k }},
	{"output_cost_per_reasoning_token", func(p *Price) *int64 { return &p.Reasoning }, nil},
}

// Parse reads a price table in the format of LiteLLM's
// model_prices_and_context_window.json: a JSON object of model names to
// entries. Of an entry it reads the per-token prices in USD that Price
// holds, including the tier fields "<field>_above_<N>k_tokens" (one tier
// threshold per entry), and ignores every other field (litellm_provider,
// mode, max_tokens, supports_*, the "_priority", "_flex" and "_batches"
// prices...); a price of null is unset. An entry with no per-token price at
// all (an image model priced per image, say) is left out, so that Lookup
// reports it unpriced rather than free. The "sample_spec" entry is skipped.
//
// Prices are read from the text of their JSON numbers into whole
// pico-dollars, exactly: 3.75e-08 is 37,500. Parse refuses the whole file,
// with an error wrapping ErrInvalid that names the entry and the field,
// when a price is not a number, is negative, is not a whole number of
// pico-dollars or is above MaxPrice, and when the file is not one strict
// JSON object: a syntax error, a name twice in one object (at any depth),
// anything after the object, invalid UTF-8, or more than MaxFileSize bytes.
// An error reading r is returned as is, wrapped.
func Parse(r io.Reader) (*Table, error) { return parseLimited(r, MaxFileSize) }

// parseLimited is Parse with a bound of limit bytes.
func parseLimited(r io.Reader, limit int64) (*Table, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("pricing: reading the price file: %w", err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("pricing: price file larger than %d bytes: %w", limit, ErrInvalid)
	}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("pricing: price file is not valid UTF-8: %w", ErrInvalid)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	prices, err := parseEntries(dec)
	if err != nil {
		return nil, err
	}
	return newTable(prices), nil
}

// parseEntries reads the top-level object and checks that nothing follows.
func parseEntries(dec *json.Decoder) (map[string]Price, error) {
	if err := openObject(dec); err != nil {
		return nil, fileErr(dec, err)
	}
	prices := make(map[string]Price)
	seen := make(map[string]bool)
	for dec.More() {
		name, err := objectKey(dec)
		if err != nil {
			return nil, fileErr(dec, err)
		}
		if seen[name] {
			return nil, fmt.Errorf("pricing: model %q appears twice: %w", name, ErrInvalid)
		}
		seen[name] = true
		if name == "sample_spec" {
			err = skipValue(dec, 1)
		} else {
			err = parseModel(dec, name, prices)
		}
		if err != nil {
			return nil, fmt.Errorf("pricing: model %q: %v: %w", name, err, ErrInvalid)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, fileErr(dec, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("pricing: price file: data after the top-level object, at byte %d: %w", dec.InputOffset(), ErrInvalid)
	}
	return prices, nil
}

// parseModel reads one entry into prices, if it holds a per-token price.
func parseModel(dec *json.Decoder, name string, prices map[string]Price) error {
	if name == "" {
		return errors.New("an empty model name")
	}
	p, priced, err := parseEntry(dec)
	if err == nil && priced {
		prices[name] = p
	}
	return err
}

// fileErr describes an error of the file's structure, with where it was.
func fileErr(dec *json.Decoder, err error) error {
	return fmt.Errorf("pricing: price file: %v, at byte %d: %w", eofErr(err), dec.InputOffset(), ErrInvalid)
}

// eofErr turns the decoder's io.EOF in the middle of a value into what it is.
func eofErr(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseEntry reads one model's entry: its prices, and whether it had any.
func parseEntry(dec *json.Decoder) (p Price, priced bool, err error) {
	if err := openObject(dec); err != nil {
		return p, false, err
	}
	seen := make(map[string]bool)
	var tier int64 // the threshold of the tier fields read so far
	for dec.More() {
		key, err := objectKey(dec)
		if err != nil {
			return p, false, err
		}
		if seen[key] {
			return p, false, fmt.Errorf("field %q appears twice", key)
		}
		seen[key] = true
		set, threshold, err := p.setField(dec, key)
		if err == nil && threshold != 0 && tier != 0 && threshold != tier {
			err = fmt.Errorf("a second tier threshold (%d and %d tokens): one per model is supported", tier, threshold)
		}
		if err != nil {
			return p, false, fmt.Errorf("%s: %w", key, err)
		}
		priced, tier = priced || set, max(tier, threshold)
	}
	if tier != DefaultThreshold {
		p.Threshold = tier
	}
	_, err = dec.Token() // the closing '}'
	return p, priced, eofErr(err)
}

// setField reads the value of the entry's field key into p if key is a
// price field, or skips it. It reports whether it set a price, and the
// threshold of a tier field that it set.
func (p *Price) setField(dec *json.Decoder, key string) (bool, int64, error) {
	dst, threshold := p.slot(key)
	if dst == nil {
		return false, 0, skipValue(dec, 2)
	}
	v, set, err := priceValue(dec)
	if err != nil || !set {
		return false, 0, err
	}
	*dst = v
	return true, threshold, nil
}

// slot returns where the field key goes in p, and for a tier field its
// threshold in tokens; nil for a field that is not a per-token price.
func (p *Price) slot(key string) (*int64, int64) {
	for _, f := range priceFields {
		if key == f.name {
			return f.base(p), 0
		}
	}
	for _, f := range priceFields {
		rest, ok := strings.CutPrefix(key, f.name+"_above_")
		if !ok || f.tier == nil {
			continue
		}
		if n := tierTokens(rest); n > 0 {
			return f.tier(p), n
		}
	}
	return nil, 0
}

// tierTokens reads the threshold of a tier field's suffix, "200k_tokens"
// or "128000_tokens", in tokens; 0 if s is neither.
func tierTokens(s string) int64 {
	s, ok := strings.CutSuffix(s, "_tokens")
	if !ok {
		return 0
	}
	unit := int64(1)
	if k, ok := strings.CutSuffix(s, "k"); ok {
		s, unit = k, 1000
	}
	if len(s) > 9 || !allDigits(s) {
		return 0
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n * unit
}

// priceValue reads a price: a JSON number in USD per token, returned in
// pico-dollars, or null (unset: false).
func priceValue(dec *json.Decoder) (int64, bool, error) {
	tok, err := dec.Token()
	if err != nil {
		return 0, false, eofErr(err)
	}
	switch v := tok.(type) {
	case nil:
		return 0, false, nil
	case json.Number:
		p, err := picoPrice(string(v))
		return p, err == nil, err
	}
	return 0, false, fmt.Errorf("want a number, got %s", describe(tok))
}

// picoPrice converts a price in USD per token, the text of a JSON number,
// to pico-dollars, exactly, within [0, MaxPrice].
func picoPrice(s string) (int64, error) {
	v, err := scaled(s, 12)
	switch {
	case strings.HasPrefix(s, "-") && (err != nil || v < 0):
		return 0, fmt.Errorf("%.40s USD is negative", s)
	case err == errFraction:
		return 0, fmt.Errorf("%.40s USD is not a whole number of pico-dollars (1e-12 USD)", s)
	case err == errRange || err == nil && v > MaxPrice:
		return 0, fmt.Errorf("%.40s USD a token is above MaxPrice, $1", s)
	case err != nil:
		return 0, fmt.Errorf("%.40q: %v", s, err)
	}
	return v, nil
}
