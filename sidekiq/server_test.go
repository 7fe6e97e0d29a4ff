package sidekiq_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/outboxgo/outbox/internal/testkit/redistest"
)

// adminPassword is the password of a private server's default user.
const adminPassword = "admin-pw"

// privateRedis is a redis-server of one test's own (internal/testkit/redistest),
// started with --requirepass adminPassword, killed at cleanup. admin is a
// client of its default user.
type privateRedis struct {
	*redistest.Server
	admin *goredis.Client
}

// startPrivateRedis starts a private server, or ends the test (see
// testenv.Unreachable) where redis-server cannot run.
func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	s := redistest.Start(t, redistest.Options{RequirePass: adminPassword})
	return &privateRedis{Server: s, admin: s.Client()}
}

// url is the server's redis:// URL with the given user information
// ("user:pw", ":pw", or "" for none) and database.
func (s *privateRedis) url(userinfo string, db int) string {
	if userinfo == "" {
		return s.URLWith(nil, db)
	}
	name, pw, _ := strings.Cut(userinfo, ":")
	return s.URLWith(url.UserPassword(name, pw), db)
}

// addUser creates an ACL user of the private server with the rules given
// (e.g. "~*", "+@all", "-lpush"); its password is its name + "-pw".
func (s *privateRedis) addUser(t testing.TB, name string, rules ...string) string {
	t.Helper()
	return s.AddUser(t, name, rules...).String()
}

// expectEmpty fails the test, at cleanup, when the private server holds
// any key: what a refused publisher sent must not have landed.
func (s *privateRedis) expectEmpty(t testing.TB) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		keys, err := s.admin.Keys(ctx, "*").Result()
		switch {
		case err != nil && !errors.Is(err, goredis.ErrClosed):
			t.Errorf("KEYS on the private server: %v", err)
		case len(keys) > 0:
			t.Errorf("the private server holds %v: a refused publisher wrote to it", keys)
		}
	})
}
