package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	etags "github.com/ratestore/ratestore/internal/etag"
)

// files are the console's page and its assets, built into the binary: no
// CDN, no build step, nothing to install beside the binary.
//
//go:embed assets
var files embed.FS

// asset is one embedded file, ready to serve: its bytes, gzipped too when
// that saves, and the ETag of each.
type asset struct {
	ctype      string
	body, gz   []byte // gz: nil when gzip does not save a tenth
	etag, gzTg string
}

// loadAssets returns the embedded files by their path under assets/, read
// and compressed once per process.
var loadAssets = sync.OnceValue(func() map[string]*asset {
	m := make(map[string]*asset)
	fs.WalkDir(files, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		m[strings.TrimPrefix(p, "assets/")] = newAsset(p, b)
		return nil
	})
	return m
})

func newAsset(name string, b []byte) *asset {
	sum := sha256.Sum256(b)
	tag := hex.EncodeToString(sum[:12])
	a := &asset{ctype: contentType(name), body: b, etag: `"` + tag + `"`}
	var z bytes.Buffer
	w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
	w.Write(b)
	w.Close()
	if z.Len() < len(b)-len(b)/10 {
		a.gz, a.gzTg = z.Bytes(), `"`+tag+`-gz"`
	}
	return a
}

// contentType is the Content-Type of an asset named name: fixed for the
// kinds a page uses, so that it does not depend on the host's MIME
// tables (nosniff makes a browser refuse a script of the wrong type).
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".ico":
		return "image/x-icon"
	case ".json", ".map":
		return "application/json"
	case ".woff2":
		return "font/woff2"
	case ".txt", ".md", "":
		return "text/plain; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// serve answers a GET or HEAD of a, gzipped when the client takes it. The
// client revalidates every time (no-cache), which costs a 304 on loopback,
// so that a new binary's page is never mixed with an old one's scripts.
func (a *asset) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	body, etag := a.body, a.etag
	h.Set("Vary", "Accept-Encoding")
	if a.gz != nil && acceptsGzip(r) {
		body, etag = a.gz, a.gzTg
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", etag)
	if etags.Matches(r.Header.Get("If-None-Match"), etag) {
		h.Del("Content-Encoding")
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// acceptsGzip reports whether r's Accept-Encoding takes gzip.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				q := strings.ReplaceAll(params, " ", "")
				return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
			}
		}
	}
	return false
}

// Assets returns the names of the embedded files, as served under
// /admin/assets/, in no order: for tests that fetch each.
func Assets() []string {
	m := loadAssets()
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	return names
}
