package webhook

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// ErrForbiddenAddress is the error (misconfigured) of an endpoint whose
// host resolved to an address the SSRF guard refuses.
var ErrForbiddenAddress = errors.New("address refused by the SSRF guard (allow it with allow_private=true or allow_cidr)")

// guard decides which addresses the publisher may connect to.
type guard struct {
	allowPrivate bool
	allow        []netip.Prefix
}

// reserved are ranges that are no public unicast address beyond those
// netip's predicates name: "this network", shared address space (carrier
// NAT), IETF protocol assignments, benchmarking, and the reserved block
// with the broadcast address.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
}

// nat64 is the well-known NAT64 prefix: its addresses reach the IPv4
// address in their last 4 bytes.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// refused returns why a is refused, or "" when the publisher may connect
// to it.
func (g *guard) refused(a netip.Addr) string {
	a = a.Unmap()
	for _, p := range g.allow {
		if p.Contains(a) {
			return ""
		}
	}
	if g.allowPrivate {
		return ""
	}
	if nat64.Contains(a) {
		b := a.As16()
		if why := g.refused(netip.AddrFrom4([4]byte(b[12:]))); why != "" {
			return "NAT64 of " + why
		}
		return ""
	}
	switch {
	case a.IsLoopback():
		return "a loopback address"
	case a.IsPrivate():
		return "a private address"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "a link-local address"
	case a.IsUnspecified():
		return "the unspecified address"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast address"
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return "a reserved address (" + p.String() + ")"
		}
	}
	return ""
}

// control is the net.Dialer's Control: it runs for the address actually
// dialed, after name resolution, so a name that resolves to a refused
// address (DNS rebinding included) cannot pass.
func (g *guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, _, _ := net.SplitHostPort(address)
		a, perr := netip.ParseAddr(host)
		if perr != nil {
			return fmt.Errorf("%w: %s is no IP address", ErrForbiddenAddress, address)
		}
		ap = netip.AddrPortFrom(a, 0)
	}
	if why := g.refused(ap.Addr()); why != "" {
		return fmt.Errorf("%w: %s is %s", ErrForbiddenAddress, ap.Addr(), why)
	}
	return nil
}
