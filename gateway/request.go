package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ratestore/ratestore/internal/sat"
)

// A request body is read once, strictly, and what is forwarded is what was
// read: the gateway admits a request on its model and reserves on its
// maximum output, so it must read them exactly as the upstream will. Two
// JSON parsers disagree on a document only where the document is
// ambiguous, so the gateway refuses every ambiguity an upstream might
// resolve otherwise:
//
//   - anything that is not one JSON object: a byte order mark or any other
//     byte before it, anything but white space after it, invalid UTF-8,
//     NaN and the like (RFC 8259, as package jsontext reads it);
//   - a member name twice in one object, escaped or not ("mod\u0065l" is
//     "model"), at any depth;
//   - a name that differs only in case from one the gateway reads
//     ("Model", "MAX_TOKENS", or "max_to\u212aens" with a Kelvin sign):
//     Go's encoding/json matches names so, and so might an upstream;
//   - a field the gateway reads with a value of the wrong type, or a count
//     that is not a whole number >= 0 (100.0 and 1e2 are 100; a count too
//     large for an int64 saturates).

// bodyFields is what the gateway reads of a request body.
type bodyFields struct {
	model     string
	hasModel  bool
	modelAt   [2]int // where the model's value is (start and end offsets), for Azure's responses
	maxOutput int64  // the maximum output named; 0: none
	choices   int64  // n, best_of or candidateCount: outputs generated; 0: one
	stream    bool

	// For askUsage: where the stream_options value and its include_usage
	// value are (start and end offsets; end 0: absent).
	opts         [2]int
	includeUsage [2]int
	usageAsked   bool
	background   bool
	config       bool // a generationConfig was read

	// endUser is the end user the body names: OpenAI's user, else its
	// safety_identifier; Anthropic's metadata.user_id. "": none.
	endUser, safetyID string
}

// bodyError is a body the gateway cannot read exactly as the upstream
// would: 400, with the message.
type bodyError struct{ msg string }

func (e *bodyError) Error() string { return "the request body " + e.msg }

func bodyErrorf(format string, args ...any) *bodyError {
	return &bodyError{msg: fmt.Sprintf(format, args...)}
}

// The fields read, by dialect.
var (
	openAIFields    = []string{"model", "max_tokens", "max_completion_tokens", "max_output_tokens", "n", "best_of", "stream", "stream_options", "background", "user", "safety_identifier"}
	anthropicFields = []string{"model", "max_tokens", "stream", "metadata"}
	metadataFields  = []string{"user_id"}
	geminiFields    = []string{"generationConfig", "generation_config"}
	configFields    = []string{"maxOutputTokens", "max_output_tokens", "candidateCount", "candidate_count"}
	optionFields    = []string{"include_usage"}
)

// decoders are the parsers of request bodies: each keeps its buffers.
var decoders = sync.Pool{New: func() any { return new(jsontext.Decoder) }}

// decoder returns a decoder of b; done gives it back.
func decoder(b []byte) (dec *jsontext.Decoder, done func()) {
	dec = decoders.Get().(*jsontext.Decoder)
	dec.Reset(bytes.NewBuffer(b)) // parsed in place, not copied
	return dec, func() {
		dec.Reset(eof{}) // not to keep b
		decoders.Put(dec)
	}
}

// eof is an empty reader.
type eof struct{}

func (eof) Read([]byte) (int, error) { return 0, io.EOF }

// parseBody reads body, the JSON object of a request to an endpoint of
// dialect d.
func parseBody(body []byte, d dialect) (bodyFields, error) {
	var f bodyFields
	if len(body) == 0 {
		return f, bodyErrorf("is empty: this endpoint takes a JSON object")
	}
	dec, done := decoder(body)
	defer done()
	fields := openAIFields
	switch d {
	case anthropic:
		fields = anthropicFields
	case gemini:
		fields = geminiFields
	}
	err := object(dec, fields, func(name string) error {
		return f.member(dec, d, name)
	})
	if err == nil {
		if _, err = dec.ReadToken(); err == io.EOF {
			err = nil
		} else if err == nil {
			err = errors.New("more than one JSON value")
		}
	}
	if err != nil {
		var be *bodyError
		if errors.As(err, &be) {
			return f, be
		}
		return f, bodyErrorf("is not one valid JSON object: %v", strings.TrimPrefix(err.Error(), "jsontext: "))
	}
	return f, nil
}

// object reads an object from dec, calling member with the name of each
// of its members that is one of fields (which must read the value) and
// skipping the others. A name that equals one of fields but for case is
// refused.
func object(dec *jsontext.Decoder, fields []string, member func(name string) error) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '{' {
		return bodyErrorf("is not a JSON object")
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		name := tok.String()
		read := false
		for _, f := range fields {
			if name == f {
				read = true
				if err := member(name); err != nil {
					return err
				}
				break
			}
			if strings.EqualFold(name, f) {
				return bodyErrorf("has field %q: field names are case-sensitive, and this gateway reads %q", name, f)
			}
		}
		if !read {
			if err := dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	_, err = dec.ReadToken() // '}', or the error of what stands there
	return err
}

// member reads the value of the top-level member name.
func (f *bodyFields) member(dec *jsontext.Decoder, d dialect, name string) error {
	switch name {
	case "model":
		v, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if v.Kind() != '"' {
			return bodyErrorf("has a model that is not a string")
		}
		name, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			return err
		}
		end := int(dec.InputOffset())
		f.model, f.hasModel, f.modelAt = string(name), true, [2]int{end - len(v), end}
	case "max_tokens", "max_completion_tokens", "max_output_tokens":
		n, err := count(dec, name)
		f.maxOutput = max(f.maxOutput, n)
		return err
	case "n", "best_of": // completions generate best_of, return n
		n, err := count(dec, name)
		f.choices = max(f.choices, n)
		return err
	case "stream":
		var err error
		f.stream, _, err = boolean(dec, name)
		return err
	case "background":
		var err error
		f.background, _, err = boolean(dec, name)
		return err
	case "stream_options":
		return f.streamOptions(dec)
	case "user":
		var err error
		f.endUser, err = optionalString(dec, name)
		return err
	case "safety_identifier":
		var err error
		f.safetyID, err = optionalString(dec, name)
		return err
	case "metadata":
		return f.metadata(dec)
	case "generationConfig", "generation_config":
		if f.config {
			return bodyErrorf("has both generationConfig and generation_config")
		}
		f.config = true
		return f.generationConfig(dec)
	}
	return nil
}

// streamOptions reads OpenAI's stream_options: null or an object, whose
// include_usage is a boolean. It notes where the value and its
// include_usage are, for askUsage.
func (f *bodyFields) streamOptions(dec *jsontext.Decoder) error {
	v, err := dec.ReadValue()
	if err != nil {
		return err
	}
	end := int(dec.InputOffset())
	f.opts = [2]int{end - len(v), end}
	switch v.Kind() {
	case 'n':
		return nil
	case '{':
	default:
		return bodyErrorf("has a stream_options that is not an object")
	}
	sub, done := decoder(v)
	defer done()
	return object(sub, optionFields, func(string) error {
		asked, n, err := boolean(sub, "stream_options.include_usage")
		at := f.opts[0] + int(sub.InputOffset())
		f.usageAsked, f.includeUsage = asked, [2]int{at - n, at}
		return err
	})
}

// metadata reads Anthropic's metadata: null or an object, whose user_id
// is a string or null.
func (f *bodyFields) metadata(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '{':
	default:
		return bodyErrorf("has a metadata that is not an object")
	}
	return object(dec, metadataFields, func(string) error {
		var err error
		f.endUser, err = optionalString(dec, "metadata.user_id")
		return err
	})
}

// optionalString reads a string, or null (""), the value of field name.
func optionalString(dec *jsontext.Decoder, name string) (string, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return "", err
	}
	switch tok.Kind() {
	case 'n':
		return "", nil
	case '"':
		return tok.String(), nil
	}
	return "", bodyErrorf("has a %s that is not a string", name)
}

// generationConfig reads Gemini's generationConfig (or generation_config,
// as its JSON mapping also accepts).
func (f *bodyFields) generationConfig(dec *jsontext.Decoder) error {
	if dec.PeekKind() == 'n' {
		_, err := dec.ReadToken()
		return err
	}
	if dec.PeekKind() != '{' {
		return bodyErrorf("has a generationConfig that is not an object")
	}
	var seenMax, seenCount bool
	return object(dec, configFields, func(name string) error {
		n, err := count(dec, "generationConfig."+name)
		switch name {
		case "maxOutputTokens", "max_output_tokens":
			if seenMax {
				return bodyErrorf("has both maxOutputTokens and max_output_tokens")
			}
			seenMax, f.maxOutput = true, n
		default:
			if seenCount {
				return bodyErrorf("has both candidateCount and candidate_count")
			}
			seenCount, f.choices = true, n
		}
		return err
	})
}

// boolean reads a boolean, or null (false), and returns the length of the
// literal it read.
func boolean(dec *jsontext.Decoder, name string) (bool, int, error) {
	v, err := dec.ReadValue()
	if err != nil {
		return false, 0, err
	}
	switch v.Kind() {
	case 't':
		return true, len(v), nil
	case 'f', 'n':
		return false, len(v), nil
	}
	return false, 0, bodyErrorf("has a %s that is not true or false", name)
}

// count reads a count: null (0), or a whole number >= 0, saturating at
// math.MaxInt64.
func count(dec *jsontext.Decoder, name string) (int64, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return 0, err
	}
	switch tok.Kind() {
	case 'n':
		return 0, nil
	case '0':
		if n, ok := wholeNumber(tok.String()); ok {
			return n, nil
		}
	}
	return 0, bodyErrorf("has a %s that is not a whole number >= 0", name)
}

// wholeNumber returns the value of num, a JSON number (RFC 8259), when it
// is a whole number >= 0, saturating at math.MaxInt64: 100, 100.0, 1e2
// and 1000e-1 are 100; -0 is 0. It computes on the digits, never through
// a float, and an exponent of any size costs nothing.
func wholeNumber(num string) (int64, bool) {
	neg := strings.HasPrefix(num, "-")
	num = strings.TrimPrefix(num, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(num), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, true // zero, whatever its sign and exponent
	}
	if neg {
		return 0, false
	}
	// value = digits * 10^e
	e := sat.Sub(expValue(exp), int64(len(frac)))
	trimmed := strings.TrimRight(digits, "0")
	e = sat.Add(e, int64(len(digits)-len(trimmed)))
	digits = trimmed
	if e < 0 {
		return 0, false // a fraction: its last digit is not zero
	}
	if sat.Add(int64(len(digits)), e) > 19 {
		return math.MaxInt64, true
	}
	var n int64
	for _, c := range digits {
		n = sat.Add(sat.Mul(n, 10), int64(c-'0'))
	}
	for range e {
		n = sat.Mul(n, 10)
	}
	return n, true
}

// expValue is the value of a JSON number's exponent digits (with their
// sign), saturating: "" is 0.
func expValue(exp string) int64 {
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(exp, "+-")
	var e int64
	for _, c := range exp {
		e = sat.Add(sat.Mul(e, 10), int64(c-'0'))
	}
	if neg {
		return -e
	}
	return e
}
