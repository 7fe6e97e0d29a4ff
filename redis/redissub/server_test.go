package redis_test

import (
	"net/url"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/testkit/redistest"
)

// adminPassword is the password of a private server's default user.
const adminPassword = "admin-pw"

// privateRedis is a redis-server of one test's own (internal/redistest),
// started with --requirepass adminPassword, killed at cleanup. admin is a
// client of its default user.
type privateRedis struct {
	*redistest.Server
	addr  string
	admin *goredis.Client
}

// startPrivateRedis starts a private server, or ends the test (see
// testenv.Unreachable) where redis-server cannot run.
func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	s := redistest.Start(t, redistest.Options{RequirePass: adminPassword})
	return &privateRedis{Server: s, addr: s.Addr(), admin: s.Client()}
}

// url is the server's URL with the given user information (":pw", or ""
// for none) and database.
func (s *privateRedis) url(userinfo string, db int) string {
	if userinfo == "" {
		return s.URLWith(nil, db)
	}
	name, pw, _ := strings.Cut(userinfo, ":")
	return s.URLWith(url.UserPassword(name, pw), db)
}
