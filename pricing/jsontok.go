package pricing

import (
	"encoding/json"
	"fmt"
)

// openObject reads the '{' that opens an object.
func openObject(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return eofErr(err)
	}
	if tok != json.Delim('{') {
		return fmt.Errorf("want an object, got %s", describe(tok))
	}
	return nil
}

// objectKey reads the name of an object's next member.
func objectKey(dec *json.Decoder) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", eofErr(err)
	}
	name, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("want a name, got %s", describe(tok))
	}
	return name, nil
}

// skipValue reads one value and throws it away, refusing a name twice in
// any object within it (strict JSON, as the rest of the file) and nesting
// deeper than maxDepth; depth is the value's own.
func skipValue(dec *json.Decoder, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("values nested deeper than %d", maxDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return eofErr(err)
	}
	switch tok {
	case json.Delim('['):
		for dec.More() {
			if err := skipValue(dec, depth+1); err != nil {
				return err
			}
		}
	case json.Delim('{'):
		if err := skipMembers(dec, depth); err != nil {
			return err
		}
	default:
		return nil // a scalar: it was the whole value
	}
	_, err = dec.Token() // the closing ']' or '}'
	return eofErr(err)
}

// skipMembers reads the members of an object whose '{' has been read, up
// to its '}', which it leaves.
func skipMembers(dec *json.Decoder, depth int) error {
	seen := make(map[string]bool)
	for dec.More() {
		name, err := objectKey(dec)
		if err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("name %q appears twice in one object", name)
		}
		seen[name] = true
		if err := skipValue(dec, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// describe names a token in an error.
func describe(tok json.Token) string {
	switch v := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("the string %.40q", v)
	case json.Number:
		return "the number " + string(v)
	case bool:
		return fmt.Sprintf("%t", v)
	case nil:
		return "null"
	}
	return fmt.Sprintf("%v", tok)
}
