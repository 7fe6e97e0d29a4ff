package webhook

import (
	"net/netip"
	"testing"
)

func TestGuardRefuses(t *testing.T) {
	def := &guard{}
	for _, c := range []struct {
		addr    string
		refused bool
	}{
		{"127.0.0.1", true}, {"127.8.9.10", true}, {"::1", true}, {"::ffff:127.0.0.1", true},
		{"10.1.2.3", true}, {"172.16.0.1", true}, {"192.168.1.1", true}, {"fd00::1", true}, {"fc00::1", true},
		{"169.254.169.254", true}, {"fe80::1", true}, {"0.0.0.0", true}, {"::", true},
		{"224.0.0.1", true}, {"ff02::1", true}, {"100.64.0.1", true}, {"255.255.255.255", true},
		{"64:ff9b::a9fe:a9fe", true}, // NAT64 of 169.254.169.254
		{"93.184.215.14", false}, {"2606:2800:21f:cb07:6820:80da:af6b:8b2c", false}, {"8.8.8.8", false},
		{"64:ff9b::808:808", false}, // NAT64 of 8.8.8.8
	} {
		if got := def.refused(netip.MustParseAddr(c.addr)) != ""; got != c.refused {
			t.Errorf("refused(%s) = %v, want %v", c.addr, got, c.refused)
		}
	}
	allowed := &guard{allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("127.0.0.1/32")}}
	for addr, refused := range map[string]bool{"10.1.2.3": false, "127.0.0.1": false, "::ffff:127.0.0.1": false, "10.2.0.1": true, "127.0.0.2": true} {
		if got := allowed.refused(netip.MustParseAddr(addr)) != ""; got != refused {
			t.Errorf("with allow_cidr: refused(%s) = %v, want %v", addr, got, refused)
		}
	}
	if (&guard{allowPrivate: true}).refused(netip.MustParseAddr("192.168.1.1")) != "" {
		t.Error("allow_private refused 192.168.1.1")
	}
	if err := def.control("tcp", "127.0.0.1:80", nil); err == nil {
		t.Error("control let 127.0.0.1 through")
	}
	if err := def.control("tcp", "[2606:2800:21f:cb07:6820:80da:af6b:8b2c]:443", nil); err != nil {
		t.Errorf("control: %v", err)
	}
}

func TestForTopic(t *testing.T) {
	for _, c := range []struct{ endpoint, topic, want string }{
		{"https://h/in", "x", "https://h/in"},
		{"https://h/in/{topic}", "orders", "https://h/in/orders"},
		{"https://h/in/%7Btopic%7D/x?a=1", "orders", "https://h/in/orders/x?a=1"},
		{"https://h:8443/{topic}", "a/b c?#", "https://h:8443/a%2Fb%20c%3F%23"},
		{"https://h/in/{topic}", "..", "https://h/in/%2E%2E"},
		{"https://h/in/{topic}", "☃", "https://h/in/%E2%98%83"},
	} {
		e, err := parseEndpoint("endpoint", c.endpoint)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.forTopic(c.topic); got != c.want {
			t.Errorf("%s with %q = %s, want %s", c.endpoint, c.topic, got, c.want)
		}
	}
}
