package meter

import "bytes"

// A model API's response can be of any size (a long generation, an image
// or audio in base64), and the gateway passes it on as it arrives: it may
// not hold a body whole to find the small usage object in it. usageScan
// is a JSON tokenizer fed the body in the pieces the upstream sends, that
// keeps nothing of a document but the containers it is in and copies out
// only the usage objects:
//
//   - "usage" or "usageMetadata" (Gemini's) of the document, and
//   - "usage" of the document's "message" (Anthropic's message_start event)
//     or "response" (the OpenAI Responses API's events),
//
// where the document is the top-level object, or each object of a
// top-level array (Gemini's streamGenerateContent without alt=sse). Its
// memory is one byte per level of nesting, up to maxDepth, and the usage
// object being copied, up to MaxUsageBytes; the bytes of strings, which
// are most of a body, are skipped with bytes.IndexAny.
//
// It does not validate: text that is not JSON yields whatever usage
// objects its braces delimit, which the caller then decodes with
// encoding/json (and ignores when they do not decode). Keys are compared
// as they are written: an escaped key ("usag\u0065") is not recognised.
type usageScan struct {
	found func(usage []byte) // called with each usage object copied out

	started bool
	base    int    // the depth of the document's objects: 1, or 2 in a top-level array
	stack   []byte // the containers open, '{' or '['
	broken  bool   // nested deeper than maxDepth: the rest is ignored

	str, esc bool   // in a string; after its backslash
	isKey    bool   // the string is an object's key
	wantKey  bool   // in an object, where a key comes next
	pending  bool   // after a key's colon: a value comes next
	key      []byte // the key being read, up to maxKeyBytes
	longKey  bool   // the key was longer (or escaped): no match
	lastKey  string // the last key read, if one of interest
	docKey   string // the key of the document's member the scan is in

	capturing bool
	capDepth  int    // the depth inside the usage object
	capture   []byte // the usage object so far
	dropped   bool   // it is longer than MaxUsageBytes: not copied
	tooLarge  bool   // a usage object was dropped
}

// MaxUsageBytes bounds a usage object: one is a few hundred bytes, and a
// longer one is skipped (Usage.TooLarge) rather than held.
const MaxUsageBytes = 1 << 16

const (
	maxDepth    = 10000 // as encoding/json's
	maxKeyBytes = len("usageMetadata")
)

// reset makes s ready for a new document.
func (s *usageScan) reset() {
	*s = usageScan{found: s.found, stack: s.stack[:0], key: s.key[:0], capture: s.capture[:0], tooLarge: s.tooLarge}
}

// interest returns the key as one of the few the scan looks for, or "".
func interest(k []byte) string {
	switch string(k) {
	case "usage":
		return "usage"
	case "usageMetadata":
		return "usageMetadata"
	case "message":
		return "message"
	case "response":
		return "response"
	}
	return ""
}

// feed scans the next bytes of the document.
func (s *usageScan) feed(p []byte) {
	capFrom := -1 // where the bytes of the usage object start in p
	if s.capturing {
		capFrom = 0
	}
	for i := 0; i < len(p) && !s.broken; i++ {
		c := p[i]
		if s.str {
			i = s.inString(p, i)
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		if !s.started {
			s.started, s.base = true, 1
			if c == '[' {
				s.base = 2
			}
		}
		switch c {
		case '"':
			s.startString()
		case '{', '[':
			if s.value(c) {
				capFrom = i
			}
			if len(s.stack) == maxDepth {
				s.broken = true
				break
			}
			s.stack = append(s.stack, c)
			s.wantKey = c == '{'
		case '}', ']':
			if len(s.stack) > 0 {
				s.stack = s.stack[:len(s.stack)-1]
			}
			s.wantKey, s.pending = false, false
			if s.capturing && len(s.stack) < s.capDepth {
				s.endCapture(p[capFrom : i+1])
				capFrom = -1
			}
		case ',':
			s.wantKey, s.pending = s.inObject(), false
		case ':':
			s.pending = true
		default: // a number, true, false or null, or not JSON
			s.value(c)
		}
	}
	if s.capturing && capFrom >= 0 {
		s.copy(p[capFrom:])
	}
}

// startString starts a string: a key where one comes next in an object,
// else a value.
func (s *usageScan) startString() {
	s.str = true
	s.isKey = s.wantKey && s.inObject()
	if s.isKey {
		s.key, s.longKey, s.wantKey = s.key[:0], false, false
	} else {
		s.value('"')
	}
}

// inString reads the bytes of a string from p[i:], up to its end or that
// of p, and returns the index of the last byte it read.
func (s *usageScan) inString(p []byte, i int) int {
	if s.esc {
		s.esc, s.longKey = false, true
		return i
	}
	j := bytes.IndexAny(p[i:], `"\`)
	if j < 0 {
		s.keyBytes(p[i:])
		return len(p) - 1
	}
	s.keyBytes(p[i : i+j])
	i += j
	if p[i] == '\\' {
		s.esc = true
		return i
	}
	s.str = false
	if s.isKey {
		s.lastKey = ""
		if !s.longKey {
			s.lastKey = interest(s.key)
		}
	}
	return i
}

func (s *usageScan) inObject() bool {
	return len(s.stack) > 0 && s.stack[len(s.stack)-1] == '{'
}

// keyBytes adds b to the key being read, if a key is.
func (s *usageScan) keyBytes(b []byte) {
	if !s.isKey || s.longKey {
		return
	}
	if len(s.key)+len(b) > maxKeyBytes {
		s.longKey = true
		return
	}
	s.key = append(s.key, b...)
}

// value notes that a value starts with c, and reports whether it is a
// usage object to copy (c is its opening brace).
func (s *usageScan) value(c byte) bool {
	if !s.pending {
		return false
	}
	s.pending = false
	depth, key := len(s.stack), s.lastKey
	if depth == s.base {
		s.docKey = key
	}
	if s.capturing || c != '{' {
		return false
	}
	usage := (depth == s.base && (key == "usage" || key == "usageMetadata")) ||
		(depth == s.base+1 && key == "usage" && (s.docKey == "message" || s.docKey == "response"))
	if usage {
		s.capturing, s.capDepth, s.capture, s.dropped = true, depth+1, s.capture[:0], false
	}
	return usage
}

// copy adds b to the usage object being copied, up to MaxUsageBytes.
func (s *usageScan) copy(b []byte) {
	if s.dropped {
		return
	}
	if len(s.capture)+len(b) > MaxUsageBytes {
		s.dropped, s.tooLarge, s.capture = true, true, s.capture[:0]
		return
	}
	s.capture = append(s.capture, b...)
}

// endCapture adds the last bytes b of the usage object and hands it on.
func (s *usageScan) endCapture(b []byte) {
	s.copy(b)
	s.capturing = false
	if !s.dropped {
		s.found(s.capture)
	}
	s.capture = s.capture[:0]
}
