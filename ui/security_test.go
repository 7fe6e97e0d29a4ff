package ui_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/outboxgo/outbox/ui"
)

// post sends the form to the dashboard's path with the headers, returning
// the status and the body.
func post(t *testing.T, b *bundle, path string, form url.Values, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.srv.URL+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	if header != nil {
		req.Header = header.Clone()
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A request from another site cannot retry or discard a dead event.
func TestCrossSiteActionsRefused(t *testing.T) {
	b := setup(t, nil)
	s := b.seed(t)
	form := url.Values{"id": {s.dead[0].ID.String()}}
	for name, h := range map[string]http.Header{
		"Sec-Fetch-Site": {"Sec-Fetch-Site": {"cross-site"}},
		"Origin":         {"Origin": {"http://evil.example"}},
	} {
		for _, path := range []string{"/retry", "/discard"} {
			if code, body := post(t, b, path, form, h); code != http.StatusForbidden {
				t.Errorf("%s POST %s: %d %q, want 403", name, path, code, body)
			}
		}
	}
	if n := b.count(t, "status = 2 AND id = $1", s.dead[0].ID); n != 1 {
		t.Fatalf("the dead event changed after refused requests (%d dead rows of it)", n)
	}
	// The same form from the dashboard's own page goes through.
	code, _ := post(t, b, "/retry", form, http.Header{"Sec-Fetch-Site": {"same-origin"}, "Origin": {b.srv.URL}})
	if code != http.StatusSeeOther {
		t.Fatalf("same-origin POST /retry: %d, want 303", code)
	}
	if n := b.count(t, "status = 0 AND id = $1", s.dead[0].ID); n != 1 {
		t.Errorf("the retried event is not pending (%d pending rows of it)", n)
	}
	if code, body := post(t, b, "/retry", url.Values{"id": {"not-a-uuid"}}, nil); code != http.StatusBadRequest ||
		!strings.Contains(body, "not an event ID") {
		t.Errorf("POST /retry with a bad id: %d %q, want 400 naming the id", code, body)
	}
}

// With a token every request needs it; ?token= trades it for a cookie.
func TestTokenRequired(t *testing.T) {
	const token = "s3cret-token"
	b := setup(t, &ui.Options{Token: token})
	// reply is what a GET answered.
	type reply struct {
		StatusCode int
		Header     http.Header
		cookies    []*http.Cookie
	}
	get := func(path string, h http.Header) (reply, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, b.srv.URL+path, nil)
		if h != nil {
			req.Header = h
		}
		resp, err := client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if strings.Contains(string(body), token) {
			t.Errorf("GET %s shows the token", path)
		}
		return reply{resp.StatusCode, resp.Header, resp.Cookies()}, string(body)
	}
	for _, path := range []string{"/", "/panels", "/static/ui.js", "/?token=wrong"} {
		if resp, body := get(path, nil); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d %q, want 401", path, resp.StatusCode, body)
		}
	}
	if code, _ := post(t, b, "/retry", url.Values{"id": {"01990000-0000-7000-8000-000000000000"}}, nil); code != http.StatusUnauthorized {
		t.Errorf("POST /retry without the token: %d, want 401", code)
	}
	resp, _ := get("/?token="+token+"&q=abc", nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "./?q=abc" {
		t.Fatalf("GET /?token=…: %d to %q, want 303 to ./?q=abc", resp.StatusCode, resp.Header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range resp.cookies {
		if c.Name == ui.TokenCookie {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("GET /?token=…: cookie %+v, want %s, HttpOnly, SameSite=Strict", cookie, ui.TokenCookie)
	}
	if resp, body := get("/", http.Header{"Cookie": {cookie.String()}}); resp.StatusCode != http.StatusOK || !strings.Contains(body, `id="total-pending"`) {
		t.Errorf("GET / with the cookie: %d, want the page", resp.StatusCode)
	}
	if resp, _ := get("/panels", http.Header{"Authorization": {"Bearer " + token}}); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /panels with Authorization: Bearer: %d, want 200", resp.StatusCode)
	}
}

func TestCheckBind(t *testing.T) {
	for _, c := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"127.9.9.9:8080", "", true},
		{"[::1]:8080", "", true},
		{"localhost:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"10.1.2.3:8080", "", false},
		{"0.0.0.0:8080", "t", true},
		{":8080", "t", true},
		{"127.0.0.1", "", false}, // no port
	} {
		err := ui.CheckBind(c.addr, c.token)
		if (err == nil) != c.ok {
			t.Errorf("CheckBind(%q, %q) = %v, want ok %v", c.addr, c.token, err, c.ok)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckBind(%q): more than one line: %q", c.addr, err)
		}
	}
}
