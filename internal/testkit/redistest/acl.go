package redistest

import (
	"context"
	"net/url"
	"testing"
	"time"
)

// AddUser creates an ACL user with rules (e.g. "~*", "+@all", "-xadd")
// and returns its credentials, for URLWith: the password is name + "-pw".
// It fails the test when Redis refuses.
func (s *Server) AddUser(t testing.TB, name string, rules ...string) *url.Userinfo {
	t.Helper()
	args := []any{"ACL", "SETUSER", name, "on", ">" + name + "-pw"}
	for _, r := range rules {
		args = append(args, r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.client.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", name, err)
	}
	return url.UserPassword(name, name+"-pw")
}
