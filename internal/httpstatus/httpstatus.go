// Package httpstatus notes the status a handler answered with, for the
// logs and metrics written after it returns: the gateway's requests and
// the admin API's calls.
package httpstatus

import "net/http"

// Writer is a ResponseWriter that notes the first status written: that of
// WriteHeader, or 200 at the first Write without one. Status is 0 while
// nothing was written.
type Writer struct {
	http.ResponseWriter
	Status int
}

func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *Writer) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController (which flushes streams) reach the
// server's writer.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
