// Package redact hides secrets in connection strings — passwords, tokens,
// secret-looking parameters — before they reach a log line, an error
// message or a help text.
//
// What it hides, in every URL of every scheme:
//   - all user-info: the password of user:password@ (the user name stays),
//     and a user-only user-info, which brokers read as a token
//     (nats://TOKEN@host becomes nats://xxxxx@host);
//   - the value of every secret-looking query or fragment parameter (see
//     SecretKey), case-insensitively;
//   - in comma-separated URL lists (NATS), each element;
//   - in keyword/value DSNs (host=db password=secret, Pwd=…;), the value of
//     every secret-looking keyword;
//   - in go-sql-driver/mysql DSNs (user:password@tcp(host)/db), the
//     password.
//
// A URL it cannot make sense of loses everything between "://" and its
// last "@": the package errs on the side of hiding too much.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces every hidden secret.
const Mask = "xxxxx"

// URL returns s with its secrets replaced by Mask. s is one URL
// (scheme://user:pass@host/…?token=…), a comma-separated list of them
// (NATS), an opaque URL (sqlite:rel.db?key=…), a keyword/value DSN
// (host=… password=…) or a go-sql-driver/mysql DSN. Unlike Text, it takes
// all of s as one connection string, so a password with spaces in it is
// hidden whole.
func URL(s string) string {
	switch {
	case strings.Contains(s, "://"):
		return urlList(s)
	case mysqlDSN.MatchString(s):
		return plain(s)
	case keywordDSN.MatchString(s):
		return plain(s)
	case strings.Contains(s, "@") && !strings.ContainsAny(s, " \t\n"):
		// host lists without a scheme: TOKEN@host:4222,host2
		return opaqueParams(urlList(s))
	case opaqueURL.MatchString(s):
		return opaqueParams(s)
	}
	return plain(s)
}

// Text returns free text (an error message, say) with the secrets of every
// URL, keyword/value DSN and go-sql-driver/mysql DSN in it replaced by
// Mask.
func Text(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range urlInText.FindAllStringIndex(s, -1) {
		b.WriteString(plain(s[last:m[0]]))
		b.WriteString(urlList(s[m[0]:m[1]]))
		last = m[1]
	}
	b.WriteString(plain(s[last:]))
	return b.String()
}

// SecretKey reports whether a parameter or keyword named name looks like
// it holds a secret: password, pass, pwd, passwd, token, secret, key and
// any name ending in key (apikey, api_key, access_key, sslkey), credentials,
// creds, signature, sig, jwt, seed, and any name starting with sasl or auth.
// Case, "_", "-" and "." are ignored.
func SecretKey(name string) bool {
	n := strings.Map(func(r rune) rune {
		switch r {
		case '_', '-', '.':
			return -1
		}
		return r
	}, strings.ToLower(name))
	if n == "" {
		return false
	}
	switch n {
	case "pass", "pwd", "sig", "jwt", "seed", "creds", "pin":
		return true
	}
	for _, w := range []string{"password", "passwd", "passphrase", "secret", "token", "credential", "signature", "apikey", "accesskey", "privatekey"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return strings.HasPrefix(n, "sasl") || strings.HasPrefix(n, "auth") ||
		strings.HasSuffix(n, "key") || strings.HasSuffix(n, "pass") || strings.HasSuffix(n, "pwd")
}

var (
	// urlInText finds URLs in free text; a comma continues a NATS list.
	urlInText = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s'\"`<>]+")
	// keywordDSN is a DSN of keyword=value pairs: host=db, Server=db;.
	keywordDSN = regexp.MustCompile(`^\s*[A-Za-z_][A-Za-z0-9_.-]*\s*=`)
	// opaqueURL is scheme:rest with no "//" and no space: sqlite:rel.db.
	opaqueURL = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:[^\s=]*(\?\S*)?$`)
	// keyword finds keyword=value pairs (libpq: space separated, values
	// maybe single-quoted; ODBC: ;-separated, values maybe braced).
	keyword = regexp.MustCompile(`(^|[^A-Za-z0-9_.-])([A-Za-z_][A-Za-z0-9_.-]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|\{[^}]*\}?|[^\s;]*)`)
	// mysqlDSN finds go-sql-driver/mysql DSNs with a password:
	// user:password@tcp(host)/db, user:password@/db.
	mysqlDSN = regexp.MustCompile(`([A-Za-z0-9_.$-]*):(\S*)@((?:tcp|tcp4|tcp6|udp|unix|pipe|memory)\(|/)`)
)

// plain hides the secrets of text that holds no scheme://: keyword/value
// pairs and MySQL DSNs.
func plain(s string) string {
	if !strings.Contains(s, "=") && !strings.Contains(s, "@") {
		return s
	}
	s = mysqlDSN.ReplaceAllString(s, "${1}:"+Mask+"@${3}")
	return keyword.ReplaceAllStringFunc(s, func(m string) string {
		g := keyword.FindStringSubmatch(m)
		if !SecretKey(g[2]) || g[4] == "" {
			return m
		}
		return g[1] + g[2] + g[3] + Mask
	})
}

// urlList hides the secrets of a URL or a comma-separated list of them.
func urlList(s string) string {
	var parts []string
	for _, p := range strings.Split(s, ",") {
		// An element without a scheme but with an "@", after elements
		// whose authorities have none: the commas may be a password's or
		// a token's (nats://a:b,c@h), so they are one, back to the last
		// element with a scheme.
		if !strings.Contains(p, "://") && hasAt(p) {
			k := len(parts)
			for k > 0 && !hasAt(parts[k-1]) {
				k--
				if strings.Contains(parts[k], "://") {
					break
				}
			}
			if k < len(parts) {
				p = strings.Join(parts[k:], ",") + "," + p
				parts = parts[:k]
			}
		}
		parts = append(parts, p)
	}
	for i, p := range parts {
		lead := p[:len(p)-len(strings.TrimLeft(p, " \t"))]
		p = strings.TrimLeft(p, " \t")
		if strings.Contains(p, "://") {
			parts[i] = lead + oneURL(p)
			continue
		}
		// A list element without a scheme (nats://a@h1,b@h2): its
		// user-info is a token or a user:password, and its query may hold
		// secrets too (nats://h1,h2?token=…).
		if at := strings.LastIndex(p, "@"); at >= 0 {
			parts[i] = lead + userinfo(p[:at]) + "@" + hostTail(p[at+1:])
		} else {
			parts[i] = lead + hostTail(p)
		}
	}
	return strings.Join(parts, ",")
}

// hostTail hides the secret parameters of host[:port][/path][?query]: a
// list element after the scheme's.
func hostTail(p string) string {
	if j := strings.IndexAny(p, "/?#"); j >= 0 {
		return p[:j] + params(p[j:])
	}
	return p
}

// hasAt reports whether the authority of URL (or host list element) p
// holds an "@".
func hasAt(p string) bool {
	if _, rest, ok := strings.Cut(p, "://"); ok {
		p = rest
	}
	if end := strings.IndexAny(p, "/?#"); end >= 0 {
		p = p[:end]
	}
	return strings.Contains(p, "@")
}

// oneURL hides the secrets of scheme://authority/path?query#fragment. It
// does not rely on url.Parse, which fails (or splits elsewhere) on the
// passwords people paste unescaped; a "/", "?" or "#" in a password ends
// the authority early, and the rules below find the real "@".
func oneURL(s string) string {
	i := strings.Index(s, "://")
	head, rest := s[:i+3], s[i+3:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	auth, tail := rest[:end], rest[end:]
	path, _, _ := strings.Cut(tail, "?")
	path, _, _ = strings.Cut(path, "#")
	switch {
	case strings.Contains(path, "@"):
		// An "@" in the path: a "/" in the password cut the authority.
		at := end + strings.LastIndex(path, "@")
		return head + userinfo(rest[:at]) + "@" + params(rest[at+1:])
	case !strings.Contains(auth, "@") && strings.Contains(tail, "@") &&
		(badPort(auth) || !strings.Contains(tail[:strings.Index(tail, "@")], "=")):
		// An "@" further on, and a port that is no number or no
		// parameter before the "@": a "?" or "#" in the password cut the
		// authority. (?email=a@b is a parameter, and stays.)
		at := strings.LastIndex(rest, "@")
		return head + userinfo(rest[:at]) + "@" + params(rest[at+1:])
	}
	if at := strings.LastIndex(auth, "@"); at >= 0 {
		auth = userinfo(auth[:at]) + auth[at:]
	}
	return head + auth + params(tail)
}

// userinfo hides a user-info: user:password keeps the user, a lone user
// name is taken for a token.
func userinfo(ui string) string {
	if user, _, ok := strings.Cut(ui, ":"); ok {
		return user + ":" + Mask
	}
	return Mask
}

// badPort reports whether authority host:port has a port that is not a
// number (an IPv6 literal's colons are not ports).
func badPort(auth string) bool {
	if j := strings.LastIndex(auth, "]"); j >= 0 {
		auth = auth[j+1:]
	}
	_, port, ok := strings.Cut(auth, ":")
	if !ok {
		return false
	}
	for _, r := range port {
		if r < '0' || r > '9' {
			return true
		}
	}
	return port == ""
}

// params hides secret-looking parameters in the query and the fragment of
// tail (/path?query#fragment).
func params(tail string) string {
	path, query, hasQ := strings.Cut(tail, "?")
	var frag string
	var hasF bool
	if hasQ {
		query, frag, hasF = strings.Cut(query, "#")
	} else {
		path, frag, hasF = strings.Cut(path, "#")
	}
	out := path
	if hasQ {
		out += "?" + paramList(query)
	}
	if hasF {
		out += "#" + paramList(frag)
	}
	return out
}

// paramList hides the secret-looking values of k=v&k=v (or ;-separated).
func paramList(q string) string {
	if !strings.Contains(q, "=") {
		return q
	}
	var b strings.Builder
	for q != "" {
		j := strings.IndexAny(q, "&;")
		kv, sep := q, ""
		if j >= 0 {
			kv, sep, q = q[:j], q[j:j+1], q[j+1:]
		} else {
			q = ""
		}
		k, v, ok := strings.Cut(kv, "=")
		if ok && v != "" {
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if SecretKey(name) {
				kv = k + "=" + Mask
			}
		}
		b.WriteString(kv)
		b.WriteString(sep)
	}
	return b.String()
}

// opaqueParams hides secret-looking parameters of scheme:opaque?query.
func opaqueParams(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		return s[:i] + params(s[i:])
	}
	return s
}
