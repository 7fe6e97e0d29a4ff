package nats

import (
	"net/url"
	"strings"
)

// redact returns the server URL list urls with every password (or token)
// replaced by "xxxxx", fit for errors and logs.
func redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		if err != nil {
			// Unparseable: keep nothing that could be a secret.
			if at := strings.LastIndex(p, "@"); at >= 0 {
				p = "xxxxx" + p[at:]
			}
			parts[i] = p
			continue
		}
		if u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxxxx")
			} else {
				// nats://token@host: the user name is the secret.
				u.User = url.User("xxxxx")
			}
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
