package ui

import (
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"path"
	"strings"
)

// CheckBind returns an error unless a dashboard on addr (host:port) may run
// with token: any token on a loopback address (127.0.0.0/8, ::1,
// localhost), and a token required on any other, the empty host (every
// interface) included.
func CheckBind(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: want host:port, e.g. 127.0.0.1:8080", addr)
	}
	if token != "" || isLoopback(host) {
		return nil
	}
	if host == "" {
		host = "every interface"
	}
	return fmt.Errorf("%s binds %s, not a loopback address: the dashboard's actions need a token there", addr, host)
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// secure requires token (when set) of every request before next sees it:
// an Authorization: Bearer header or the TokenCookie. A request with
// ?token= sets the cookie (HttpOnly, SameSite=Strict) and is redirected to
// the same URL without it, so the token leaves the address bar and the
// history.
func secure(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte(token)
	ok := func(got string) bool { return got != "" && subtle.ConstantTimeCompare([]byte(got), want) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Has("token") {
			if !ok(q.Get("token")) {
				http.Error(w, "outbox ui: wrong token", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q.Del("token")
			seeOther(w, r, q.Encode())
			return
		}
		if bearer, found := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); found && ok(bearer) {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(TokenCookie); err == nil && ok(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		http.Error(w, "outbox ui: a token is required: open the dashboard's URL with ?token=<token>, or send Authorization: Bearer <token>", http.StatusUnauthorized)
	})
}

// seeOther redirects to the requested page with query, by a relative URL:
// the dashboard may be mounted under a prefix it does not see.
func seeOther(w http.ResponseWriter, r *http.Request, query string) {
	loc := "./"
	if p := r.URL.Path; !strings.HasSuffix(p, "/") {
		loc = path.Base(p)
	}
	if query != "" {
		loc += "?" + query
	}
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}
