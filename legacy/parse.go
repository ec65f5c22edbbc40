package legacy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// Parse reads a legacy key file ({"keys": [...]}, LEGACY.md section 1)
// strictly, as a stream of JSON tokens: memory grows with the keys and windows
// kept, not with the file's layout.
//
// It reads the whole file even after a problem, so that the Report lists
// every problem (an invalid JSON syntax alone stops it). The classification
// of each case, refused, skipped or noted, is the table of the package
// documentation. The outcomes:
//
//   - keys (in file order, exact duplicates left out), a Report with Keys and
//     Windows counting them, and a nil error;
//   - no keys, a Report whose Refusals list every problem, and an error that
//     matches ErrRefused and names the first few of them;
//   - no keys, an empty Report and the error of r, wrapped, when reading r
//     fails: that says nothing of the file's content.
//
// Every key returned has a non-empty secret, a TokenLimit > 0, and
// LifetimeTokens and window Tokens >= 0 whose sum over Windows fits an
// int64. No secret appears in the Report or the error.
func Parse(r io.Reader) (keys []Key, rep Report, err error) {
	p := &parser{
		src:   &source{br: bufio.NewReader(r)},
		first: map[string]firstEntry{},
		names: map[string]int{},
		cur:   -1,
	}
	p.dec = json.NewDecoder(p.src)
	p.dec.UseNumber()
	if err := p.file(); err != nil && !errors.Is(err, errStop) {
		return nil, Report{}, err
	}
	if p.rep.Refused() {
		p.rep.Keys, p.rep.Windows = 0, 0
		return nil, p.rep, refusedError(p.rep.Refusals)
	}
	p.rep.Keys = len(p.keys)
	for _, k := range p.keys {
		p.rep.Windows += len(k.Windows)
	}
	return p.keys, p.rep, nil
}

// errStop stops the parse where the JSON cannot be read any further; the
// refusal that says why is in the report.
var errStop = errors.New("stop")

// source records the first error of the reader under the decoder, to tell
// a failing read from a malformed file.
type source struct {
	br  *bufio.Reader
	err error
}

func (s *source) Read(b []byte) (int, error) {
	n, err := s.br.Read(b)
	if err != nil && err != io.EOF && s.err == nil {
		s.err = err
	}
	return n, err
}

type parser struct {
	src   *source
	dec   *json.Decoder
	rep   Report
	keys  []Key
	first map[string]firstEntry // secret -> the first entry that has it
	names map[string]int        // name -> index of the first entry that has it
	cur   int                   // index of the entry being read; -1 outside "keys"
	skew  int64                 // bytes before the decoder's input (a byte order mark)
}

type firstEntry struct {
	index int
	key   Key
}

// fieldState is what an entry said of a field.
type fieldState uint8

const (
	absent   fieldState = iota // not there
	null                       // null
	valid                      // a value that was read
	rejected                   // a value that was refused
)

func (s fieldState) missing() bool { return s == absent || s == null }

// String is how a reason names a missing field.
func (s fieldState) String() string {
	if s == null {
		return "null"
	}
	return "missing"
}

// loc is where an issue is: an entry (-1 for the file), a window of it
// (-1 for none) and a field of that.
type loc struct {
	entry, window int
	field         string
}

// path is the field's path for Issue.Field.
func (l loc) path() string {
	if l.window < 0 {
		return clip(l.field)
	}
	p := "usage_windows[" + strconv.Itoa(l.window) + "]"
	if l.field != "" {
		p += "." + clip(l.field)
	}
	return p
}

func (p *parser) refuse(at loc, reason string) { p.add(&p.rep.Refusals, at, reason) }
func (p *parser) note(at loc, reason string)   { p.add(&p.rep.Notes, at, reason) }

func (p *parser) add(list *[]Issue, at loc, reason string) {
	*list = append(*list, Issue{Index: at.entry, Field: at.path(), Reason: reason})
}

// next reads a token; a token that cannot be read stops the parse.
func (p *parser) next() (json.Token, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return nil, p.fail(err)
	}
	return tok, nil
}

// fail turns an error of the decoder into the error of the parse: the
// reader's, or errStop with a refusal that says what is wrong.
func (p *parser) fail(err error) error {
	if p.src.err != nil {
		return fmt.Errorf("read legacy file: %w", p.src.err)
	}
	at := loc{entry: p.cur, window: -1}
	var syn *json.SyntaxError
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		p.refuse(at, "unexpected end of file: the JSON is cut short")
	case errors.As(err, &syn):
		p.refuse(at, fmt.Sprintf("invalid JSON near byte %d: %v", syn.Offset+p.skew, syn))
	default:
		p.refuse(at, "invalid JSON: "+err.Error())
	}
	return errStop
}

// skipRest reads the rest of a value whose first token was tok.
func (p *parser) skipRest(tok json.Token) error {
	if tok != json.Delim('{') && tok != json.Delim('[') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := p.next()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

func (p *parser) skipValue() error {
	tok, err := p.next()
	if err != nil {
		return err
	}
	return p.skipRest(tok)
}

// kind names the JSON type of a value from its first token.
func kind(tok json.Token) string {
	switch tok.(type) {
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	if tok == json.Delim('{') {
		return "an object"
	}
	return "an array"
}

// wrongType refuses a value of the wrong type, and skips it.
func (p *parser) wrongType(at loc, tok json.Token, want string) (fieldState, error) {
	p.refuse(at, "want "+want+", got "+kind(tok))
	return rejected, p.skipRest(tok)
}

// members reads the members of an object whose '{' was just read, calling
// member for each with at.field set to its name; member reads the value. A
// name that appears twice in the object is refused, and its value skipped.
func (p *parser) members(at loc, member func(at loc) error) error {
	var (
		few  [16]string          // the names seen, while they are few
		n    int                 // in few
		more map[string]struct{} // the names seen past those
	)
	for {
		tok, err := p.next()
		if err != nil {
			return err
		}
		name, ok := tok.(string)
		if !ok { // '}': the decoder gives only names and the end here
			return nil
		}
		at.field = name
		switch _, seen := more[name]; {
		case seen || slices.Contains(few[:n], name):
			p.refuse(at, "appears twice in one object")
			err = p.skipValue()
		default:
			if n < len(few) {
				few[n], n = name, n+1
			} else {
				if more == nil {
					more = map[string]struct{}{}
				}
				more[name] = struct{}{}
			}
			err = member(at)
		}
		if err != nil {
			return err
		}
	}
}

var bom = []byte("\xEF\xBB\xBF")

// file reads the whole file: {"keys": [...]} and nothing after it.
func (p *parser) file() error {
	top := loc{entry: -1, window: -1}
	b, err := p.src.br.Peek(len(bom))
	if err != nil && err != io.EOF {
		p.src.err = err
		return p.fail(err)
	}
	if bytes.Equal(b, bom) {
		_, _ = p.src.br.Discard(len(bom))
		p.skew = int64(len(bom))
		p.note(top, "starts with a UTF-8 byte order mark, ignored")
	}
	tok, err := p.dec.Token()
	if err == io.EOF && p.src.err == nil {
		p.refuse(top, `empty file: want an object {"keys": [...]}`)
		return errStop
	}
	if err != nil {
		return p.fail(err)
	}
	if tok != json.Delim('{') {
		p.refuse(top, "the file holds "+kind(tok)+`: want an object {"keys": [...]}`)
		return errStop
	}
	keys := absent
	err = p.members(top, func(at loc) error {
		if at.field != "keys" {
			p.note(at, "unknown top-level field, ignored")
			return p.skipValue()
		}
		tok, err := p.next()
		switch {
		case err != nil:
			return err
		case tok == nil:
			keys = null
		case tok == json.Delim('['):
			keys = valid
			return p.entries()
		default:
			keys, err = p.wrongType(at, tok, "an array of keys")
		}
		return err
	})
	if err != nil {
		return err
	}
	if keys.missing() {
		p.refuse(loc{entry: -1, window: -1, field: "keys"}, keys.String()+`: want {"keys": [...]}`)
	}
	end := p.dec.InputOffset() + p.skew
	switch _, err := p.dec.Token(); {
	case err == io.EOF && p.src.err == nil:
		return nil
	case p.src.err != nil:
		return p.fail(err)
	}
	p.refuse(top, fmt.Sprintf("data after the top-level object, which ends at byte %d", end))
	return errStop
}

// entries reads the elements of "keys", whose '[' was just read.
func (p *parser) entries() error {
	defer func() { p.cur = -1 }()
	for p.cur = 0; ; p.cur++ {
		tok, err := p.next()
		if err != nil {
			return err
		}
		if tok == json.Delim(']') {
			return nil
		}
		p.rep.Entries++
		if err := p.entry(tok); err != nil {
			return err
		}
	}
}
