// Package dashboard is Regent's web dashboard: one page of plain HTML, CSS
// and JavaScript (no framework, no build step), embedded in the binary, so
// that `go build` alone makes a broker that serves it.
//
// The page reads nothing but the HTTP bridge's own JSON routes (Queen's
// /api/v1/... read models plus the bridge's /api/v1/dashboard/... feeds),
// polling them every 1.5 s, and draws its charts itself as inline SVG. It
// routes by the URL's fragment (#/queues, #/queue/NAME, ...), so the server
// serves only two kinds of path:
//
//	GET /                    index.html
//	GET /dashboard/NAME      the page's files: app.css, favicon.svg, and the
//	                         JavaScript modules app.js (router, polling loop),
//	                         live.js (shared polls, history), pages.js (the
//	                         pages) and lib.js (DOM, formats, API, charts)
//
// Every file is answered with an ETag and Cache-Control: no-cache (a reload
// costs a 304), gzip-compressed when the client takes it, and the page with
// a Content-Security-Policy that allows only its own files and same-origin
// requests. When the bridge's authentication is on, the page asks for a
// token and sends it as "Authorization: Bearer"; the files themselves are
// public (they hold no data).
package dashboard
