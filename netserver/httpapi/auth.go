package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/regentmq/regent/netserver"
)

// Authentication on the HTTP door: the token comes with every request in
// "Authorization: Bearer <jwt>" (the prefix is case-insensitive and may be
// left out) and is verified by netserver.Authenticator against the level of
// the request's route (netserver's access table).

type claimsKey struct{}

// ClaimsFrom returns the verified token claims of a request's context (nil
// when auth is off or the route is public).
func ClaimsFrom(ctx context.Context) *netserver.Claims {
	c, _ := ctx.Value(claimsKey{}).(*netserver.Claims)
	return c
}

// checkAuth authenticates r for a route of level lv. On failure it has
// answered 401 or 403.
func checkAuth(a *netserver.Authenticator, w http.ResponseWriter, r *http.Request, lv netserver.Level) (*http.Request, bool) {
	tok := strings.TrimSpace(r.Header.Get("Authorization"))
	if len(tok) >= 7 && strings.EqualFold(tok[:7], "bearer ") {
		tok = strings.TrimSpace(tok[7:])
	}
	if tok == "" {
		writeError(w, http.StatusUnauthorized, "Authentication required")
		return r, false
	}
	c, err := a.Verify(tok)
	if err != nil {
		writeError(w, http.StatusUnauthorized, "Invalid token: "+err.Error())
		return r, false
	}
	if c.Level() < lv {
		writeError(w, http.StatusForbidden, "Insufficient permissions")
		return r, false
	}
	return r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)), true
}
