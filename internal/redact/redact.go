// Package redact hides passwords in connection strings before they reach a
// log line or an error message.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// keyword-style DSNs: password=secret, password='sec ret'
var dsnPassword = regexp.MustCompile(`(?i)(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s]*)`)

// URL returns s with any password replaced by "xxxxx". It takes a URL
// (scheme://user:pass@host/…), a comma-separated list of them (NATS), or a
// keyword/value DSN (host=… password=…). Text it cannot parse comes back
// with everything between "://" and the last "@" of each part hidden.
func URL(s string) string {
	if !strings.Contains(s, "://") {
		return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = one(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func one(s string) string {
	u, err := url.Parse(s)
	if err == nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	// Unparseable: hide the whole userinfo part if there is one.
	scheme, rest, _ := strings.Cut(s, "://")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		return scheme + "://xxxxx@" + rest[at+1:]
	}
	return s
}

var urlInText = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s'\"`,]+")

// Text returns free text (an error message, say) with the password of every
// URL and keyword/value DSN in it hidden.
func Text(s string) string {
	s = urlInText.ReplaceAllStringFunc(s, one)
	return dsnPassword.ReplaceAllString(s, "${1}xxxxx")
}
