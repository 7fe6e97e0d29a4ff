package redact

import (
	"net/url"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"postgres://bob:s3cret@db:5432/app?sslmode=disable", "postgres://bob:xxxxx@db:5432/app?sslmode=disable"},
		{"postgres://db/app?password=s3cret&sslmode=require", "postgres://db/app?password=xxxxx&sslmode=require"},
		{"postgres://db/app?sslmode=require&PassWord=s3cret", "postgres://db/app?sslmode=require&PassWord=xxxxx"},
		// A user-only user-info is a token.
		{"nats://s3cretTOKEN@127.0.0.1:4222", "nats://xxxxx@127.0.0.1:4222"},
		{"postgres://bob@db/app", "postgres://xxxxx@db/app"},
		{"redis://:s3cret@127.0.0.1:6379/0", "redis://:xxxxx@127.0.0.1:6379/0"},
		// NATS lists, with and without a scheme on the later elements.
		{"nats://a:s3cret@n1:4222,nats://b:s3cret@n2:4222", "nats://a:xxxxx@n1:4222,nats://b:xxxxx@n2:4222"},
		{"nats://s3cret@n1:4222, s3cret@n2:4222,n3", "nats://xxxxx@n1:4222, xxxxx@n2:4222,n3"},
		// The query of a list element after the first (found by a fuzzer).
		{"nats://,?token=S3CRETtok&0", "nats://,?token=xxxxx&0"},
		{"nats://n1:4222,n2:4222?token=s3cret", "nats://n1:4222,n2:4222?token=xxxxx"},
		{"nats://n1,a@n2?password=s3cret", "nats://xxxxx@n2?password=xxxxx"}, // the comma may be the token's
		{"s3cretTOKEN@n1:4222", "xxxxx@n1:4222"},
		// Secret-looking parameters, of any backend.
		{"kafka://h:9092?sasl=plain&sasl_password=s3cret&topic_prefix=app.", "kafka://h:9092?sasl=xxxxx&sasl_password=xxxxx&topic_prefix=app."},
		{"amqp://h/?exchange=ev&routing_key_prefix=p&auth_token=s3cret", "amqp://h/?exchange=ev&routing_key_prefix=p&auth_token=xxxxx"},
		{"x://h/?api_key=s3cret;apikey=s3cret;access_key=s3cret;Secret=s3cret;key=s3cret;credentials=s3cret;pwd=s3cret;pass=s3cret;token=s3cret",
			"x://h/?api_key=xxxxx;apikey=xxxxx;access_key=xxxxx;Secret=xxxxx;key=xxxxx;credentials=xxxxx;pwd=xxxxx;pass=xxxxx;token=xxxxx"},
		{"https://h/cb#access_token=s3cret&state=1", "https://h/cb#access_token=xxxxx&state=1"},
		{"sqlite:rel.db?_key=s3cret", "sqlite:rel.db?_key=xxxxx"},
		{"postgres://h/app?email=bob@example.com", "postgres://h/app?email=bob@example.com"},
		// Keyword/value and MySQL DSNs.
		{"host=db user=bob password=s3cret dbname=app", "host=db user=bob password=xxxxx dbname=app"},
		{"host=db password='s3 cret' dbname=app", "host=db password=xxxxx dbname=app"},
		{"Server=db;Uid=bob;Pwd={s3;cret};Database=app", "Server=db;Uid=bob;Pwd=xxxxx;Database=app"},
		{"bob:s3cret@tcp(db:3306)/app?parseTime=true", "bob:xxxxx@tcp(db:3306)/app?parseTime=true"},
		// Pasted unescaped: the password's "/", "?", "#", "@" or space.
		{"postgres://bob:s3c%zzret@db/app", "postgres://bob:xxxxx@db/app"},
		{"postgres://bob:s3/cret@db/app", "postgres://bob:xxxxx@db/app"},
		{"postgres://bob:s3?cret@db/app", "postgres://bob:xxxxx@db/app"},
		{"postgres://bob:12?s3cret@db/app", "postgres://bob:xxxxx@db/app"},
		{"postgres://bob:s3#cret@db/app", "postgres://bob:xxxxx@db/app"},
		{"postgres://bob:s3@cret@db/app", "postgres://bob:xxxxx@db/app"},
		{"postgres://bob:s3 cret@db/app", "postgres://bob:xxxxx@db/app"},
		// Nothing to hide.
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"sqlite:///var/lib/app.db", "sqlite:///var/lib/app.db"},
		{"", ""},
	} {
		got := URL(c.in)
		if got != c.want {
			t.Errorf("URL(%q) = %q, want %q", c.in, got, c.want)
		}
		if strings.Contains(got, "s3") {
			t.Errorf("URL(%q) leaks the secret: %q", c.in, got)
		}
	}
}

func TestText(t *testing.T) {
	in := "cannot parse `postgres://bob:s3cret@db/app`: failed, also host=x password=s3cret, " +
		"nats: dial nats://s3cretTOKEN@h:4222: connection refused; bob:s3cret@tcp(db)/x; \"redis://:s3cret@h/0\" token=s3cret"
	got := Text(in)
	if strings.Contains(got, "s3cret") {
		t.Fatalf("Text leaks: %q", got)
	}
	for _, want := range []string{"postgres://bob:xxxxx@db/app`", "nats://xxxxx@h:4222: connection refused", "bob:xxxxx@tcp(db)/x", `"redis://:xxxxx@h/0"`} {
		if !strings.Contains(got, want) {
			t.Errorf("Text mangled %q: %q", want, got)
		}
	}
	if s := "key not found: orders; 2 of 3 events published"; Text(s) != s {
		t.Errorf("Text changed text without secrets: %q", Text(s))
	}
}

func TestSecretKey(t *testing.T) {
	for _, k := range []string{"password", "PASSWORD", "pass", "pwd", "passwd", "token", "auth_token", "secret", "client_secret",
		"key", "apikey", "api_key", "API-KEY", "access_key", "sslkey", "sasl", "sasl_password", "saslMechanism", "credentials",
		"auth", "authorization", "sig", "X-Amz-Signature", "sslpassword", "jwt", "seed"} {
		if !SecretKey(k) {
			t.Errorf("SecretKey(%q) = false", k)
		}
	}
	for _, k := range []string{"sslmode", "exchange", "routing_key_prefix", "stream_prefix", "topic_prefix", "maxlen",
		"client_id", "application_name", "dbname", "user", "host", "keepalives", "max_message_size", ""} {
		if SecretKey(k) {
			t.Errorf("SecretKey(%q) = true", k)
		}
	}
}

// form builds an input embedding secret the way the form writes it, the
// function that must hide it, and the spellings of the secret the input
// holds; ok is false when the secret cannot be written in this form.
type form func(secret string) (in string, spellings []string, ok bool)

var secretKeys = []string{"password", "PASS", "pwd", "token", "Secret", "key", "apikey", "api_key", "access_key",
	"sasl_password", "credentials", "auth_token", "SASL"}

func forms(keyIdx byte) []form {
	key := secretKeys[int(keyIdx)%len(secretKeys)]
	userPass := func(s string) string { return url.UserPassword("bob", s).String() }
	token := func(s string) string { return url.User(s).String() }
	q := url.QueryEscape
	return []form{
		func(s string) (string, []string, bool) {
			return "postgres://" + userPass(s) + "@db:5432/app?sslmode=disable", []string{s, userPass(s)}, true
		},
		func(s string) (string, []string, bool) {
			return "nats://" + token(s) + "@127.0.0.1:4222", []string{s, token(s)}, true
		},
		func(s string) (string, []string, bool) {
			return "nats://" + userPass(s) + "@n1:4222,nats://" + token(s) + "@n2:4222," + token(s) + "@n3", []string{s, userPass(s), token(s)}, true
		},
		func(s string) (string, []string, bool) {
			return "postgres://db/app?sslmode=require&" + key + "=" + q(s) + "&x=1", []string{s, q(s)}, true
		},
		func(s string) (string, []string, bool) {
			return "amqp://h:5672/?exchange=ev#" + key + "=" + q(s), []string{s, q(s)}, true
		},
		func(s string) (string, []string, bool) {
			return "sqlite:rel.db?" + key + "=" + q(s), []string{s, q(s)}, true
		},
		func(s string) (string, []string, bool) {
			v := kwValue(s)
			return "host=db user=bob " + key + "=" + v + " dbname=app", []string{s, v}, true
		},
		func(s string) (string, []string, bool) {
			if strings.ContainsAny(s, ";{} \t\r\n\v\f") {
				return "", nil, false
			}
			return "Server=db;Uid=bob;" + key + "=" + s + ";Database=app", []string{s}, true
		},
		func(s string) (string, []string, bool) {
			if strings.ContainsAny(s, " \t\r\n\v\f") {
				return "", nil, false
			}
			return "bob:" + s + "@tcp(db:3306)/app?parseTime=true", []string{s}, true
		},
		// Pasted as is, unescaped.
		func(s string) (string, []string, bool) {
			if strings.ContainsAny(s, ",@= \t\r\n\v\f") {
				return "", nil, false
			}
			return "postgres://bob:" + s + "@db:5432/app", []string{s}, true
		},
	}
}

// kwValue writes s as a libpq keyword value, quoted when it must be.
func kwValue(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\r\n\v\f'\\;") && s[0] != '"' && s[0] != '{' {
		return s
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// FuzzRedact: whatever the secret, in whichever form it is written, no
// spelling of it survives URL, nor Text when the form is one Text finds in
// prose (the secret holds no space, quote or backquote there).
func FuzzRedact(f *testing.F) {
	for _, s := range []string{"s3cret", "p@ss:w/rd?#x", "tok en", "with'quote", `back\slash`, "semi;colon", "12?ab", "a/b@c",
		"TOKEN123", "pässwört☃", "%41%zz", "comma,sep", "=equals=", "xxxxx-ish", "{brace}"} {
		for i := range len(forms(0)) {
			f.Add(s, byte(i), byte(i))
		}
	}
	f.Fuzz(func(t *testing.T, secret string, which, keyIdx byte) {
		if len(secret) < 4 {
			return
		}
		fs := forms(keyIdx)
		fm := fs[int(which)%len(fs)]
		in, spellings, ok := fm(secret)
		if !ok {
			return
		}
		neutral, _, _ := fm("NEUTRAL0")
		check := func(name string, fn func(string) string) {
			got := fn(in)
			base := fn(neutral) + Mask
			for _, sp := range spellings {
				if strings.Contains(base, sp) {
					continue // the text around the secret spells it too
				}
				if strings.Contains(got, sp) {
					t.Fatalf("%s(%q) = %q: leaks %q", name, in, got, sp)
				}
			}
		}
		check("URL", URL)
		if !strings.ContainsAny(in, " \t\r\n\v\f'\"`<>") {
			check("Text", Text)
			check("Text in prose", func(s string) string { return Text("dial " + s + ": connection refused") })
		}
	})
}
