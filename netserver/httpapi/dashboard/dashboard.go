package dashboard

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed assets
var assets embed.FS

// AssetPrefix is the path under which the page's files are served.
const AssetPrefix = "/dashboard/"

// csp is the page's Content-Security-Policy: its own scripts and styles
// only, requests to its own origin only.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// contentTypes by file extension (not the system's MIME table, which
// differs between machines).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

type file struct {
	body, gz    []byte
	ctype, etag string
}

// Handler serves the dashboard: index.html at "/" and the files under
// AssetPrefix. Any other path answers 404. It is safe for concurrent use.
func Handler() http.Handler {
	h := &handler{files: map[string]*file{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		f := &file{body: b, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		f.ctype = contentTypes[path.Ext(p)]
		if f.ctype == "" {
			f.ctype = "application/octet-stream"
		}
		if len(b) > 512 {
			var buf bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
			zw.Write(b)
			zw.Close()
			if buf.Len() < len(b) {
				f.gz = buf.Bytes()
			}
		}
		h.files[strings.TrimPrefix(p, "assets/")] = f
		return nil
	})
	if err != nil {
		panic("dashboard: reading the embedded files: " + err.Error()) // cannot happen: they are compiled in
	}
	return h
}

type handler struct{ files map[string]*file }

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := ""
	switch {
	case r.URL.Path == "/" || r.URL.Path == "/index.html":
		name = "index.html"
	case strings.HasPrefix(r.URL.Path, AssetPrefix):
		name = strings.TrimPrefix(r.URL.Path, AssetPrefix)
	}
	f := h.files[name]
	if f == nil || strings.Contains(name, "/") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		w.Write([]byte(`{"error":"Not Found"}`))
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", f.etag)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Add("Vary", "Accept-Encoding")
	if name == "index.html" {
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Frame-Options", "DENY")
	}
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, f.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := f.body
	if f.gz != nil && acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = f.gz
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write(body)
	}
}

// acceptsGzip reports whether an Accept-Encoding header takes gzip.
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) != "gzip" && strings.TrimSpace(enc) != "*" {
			continue
		}
		params = strings.ReplaceAll(params, " ", "")
		return params != "q=0" && params != "q=0.0" && params != "q=0.00" && params != "q=0.000"
	}
	return false
}
