package natstest

import (
	"net/url"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// Credentials of the private servers StartTokenServer and StartUsersServer
// start.
const (
	// Token is what StartTokenServer's server requires.
	Token = "right-token"
	// User and Password authenticate in StartUsersServer's account with
	// JetStream.
	User     = "outbox"
	Password = "right-password"
	// NoJetStreamUser authenticates, with Password, in StartUsersServer's
	// account without JetStream.
	NoJetStreamUser = "nojs"
)

// StartTokenServer starts a private server, like StartServer, whose
// clients must present Token.
func StartTokenServer(t testing.TB) *Server {
	t.Helper()
	return StartServer(t, "", func(o *server.Options) { o.Authorization = Token })
}

// StartUsersServer starts a private server, like StartServer, whose
// clients must authenticate as User (account APP, with JetStream) or
// NoJetStreamUser (account NOJS, without), both with Password.
func StartUsersServer(t testing.TB) *Server {
	t.Helper()
	return StartServerConfig(t, `
accounts {
  APP: { jetstream: enabled, users: [ { user: "`+User+`", password: "`+Password+`" } ] }
  NOJS: { users: [ { user: "`+NoJetStreamUser+`", password: "`+Password+`" } ] }
}
`)
}

// URLWith returns the server's URL with userinfo (a token, or user and
// password) in it.
func (s *Server) URLWith(userinfo *url.Userinfo) string {
	u, err := url.Parse(s.url)
	if err != nil {
		s.t.Fatalf("server URL %q: %v", s.url, err)
	}
	u.User = userinfo
	return u.String()
}
