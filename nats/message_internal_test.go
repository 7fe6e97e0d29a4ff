package nats

import "testing"

func TestCheckSubject(t *testing.T) {
	for _, c := range []struct {
		subject      string
		wildcards    bool
		wantAccepted bool
	}{
		{"orders", false, true},
		{"outbox.orders.eu", false, true},
		{"outbox.ordres-é", false, true},
		{"", false, false},
		{".orders", false, false},
		{"orders.", false, false},
		{"outbox..orders", false, false},
		{"outbox.*", false, false},
		{"outbox.>", false, false},
		{"outbox.*", true, true},
		{"outbox.>", true, true},
		{">", true, true},
		{"outbox.>.x", true, false},
		{"outbox.a>", true, true}, // '>' inside a token is no wildcard
		{"outbox.or ders", false, false},
		{"outbox.orders\t", false, false},
		{"outbox.\x7f", false, false},
	} {
		err := checkSubject(c.subject, c.wildcards)
		if got := err == nil; got != c.wantAccepted {
			t.Errorf("checkSubject(%q, %v) = %v, want accepted %v", c.subject, c.wildcards, err, c.wantAccepted)
		}
	}
}
