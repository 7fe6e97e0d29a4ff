package mqtt

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/outboxgo/outbox/publishers"
)

// reasons names the MQTT 5 reason codes of failure (section 2.4), and the
// two successes a PUBACK may carry.
var reasons = map[byte]string{
	0x00: "Success",
	0x10: "No matching subscribers",
	0x80: "Unspecified error",
	0x81: "Malformed Packet",
	0x82: "Protocol Error",
	0x83: "Implementation specific error",
	0x84: "Unsupported Protocol Version",
	0x85: "Client Identifier not valid",
	0x86: "Bad User Name or Password",
	0x87: "Not authorized",
	0x88: "Server unavailable",
	0x89: "Server busy",
	0x8A: "Banned",
	0x8B: "Server shutting down",
	0x8C: "Bad authentication method",
	0x8D: "Keep Alive timeout",
	0x8E: "Session taken over",
	0x90: "Topic Name invalid",
	0x91: "Packet Identifier in use",
	0x93: "Receive Maximum exceeded",
	0x94: "Topic Alias invalid",
	0x95: "Packet too large",
	0x96: "Message rate too high",
	0x97: "Quota exceeded",
	0x98: "Administrative action",
	0x99: "Payload format invalid",
	0x9A: "Retain not supported",
	0x9B: "QoS not supported",
	0x9C: "Use another server",
	0x9D: "Server moved",
	0x9F: "Connection rate exceeded",
}

// reasonText is a reason code with its name: "0x87 Not authorized".
func reasonText(code byte) string {
	if name, ok := reasons[code]; ok {
		return fmt.Sprintf("%#02x %s", code, name)
	}
	return fmt.Sprintf("%#02x", code)
}

// classifyConnack classifies the refusal of a CONNACK with code: the
// credentials, the client or the protocol are the configuration's fault
// (Misconfigured); a busy or unavailable server is an outage.
func classifyConnack(err error, code byte) error {
	switch code {
	case 0x84, // Unsupported Protocol Version: the broker speaks no MQTT 5
		0x85, // Client Identifier not valid
		0x86, // Bad User Name or Password
		0x87, // Not authorized (Mosquitto's answer to a wrong password too)
		0x8A, // Banned
		0x8C, // Bad authentication method
		0x9A, // Retain not supported
		0x9B, // QoS not supported
		0x9D: // Server moved: the URL is out of date
		return publishers.Misconfigured(err)
	}
	return publishers.Unavailable(err)
}

// classifyPuback classifies the failure of a PUBACK with code (≥ 0x80):
// permission is the configuration's fault (Misconfigured), a topic,
// packet or payload the broker rejects is the message's (Permanent), a
// quota is an outage; anything else is an ordinary failure, retried.
func classifyPuback(err error, code byte) error {
	switch code {
	case 0x87: // Not authorized: the user may not publish to the topic
		return publishers.Misconfigured(err)
	case 0x90, // Topic Name invalid
		0x95, // Packet too large (Mosquitto's message_size_limit)
		0x99: // Payload format invalid
		return publishers.Permanent(err)
	case 0x97, 0x96, 0x89, 0x88, 0x8B: // quota, rate, busy, shutting down
		return publishers.Unavailable(err)
	}
	return err
}

// classifyDial classifies an error of connecting that is no CONNACK: a
// certificate the TLS configuration does not accept is Misconfigured,
// anything else (refused, unreachable, timed out, reset) Unavailable.
func classifyDial(err error) error {
	var (
		unknownAuthority x509.UnknownAuthorityError
		hostname         x509.HostnameError
		invalid          x509.CertificateInvalidError
		verify           *tls.CertificateVerificationError
		record           tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknownAuthority), errors.As(err, &hostname),
		errors.As(err, &invalid), errors.As(err, &verify):
		return publishers.Misconfigured(err)
	case errors.As(err, &record):
		// A TLS client speaking to a plain listener.
		return publishers.Misconfigured(fmt.Errorf("%w (is the port a TLS listener? mqtts:// needs one)", err))
	}
	return publishers.Unavailable(err)
}
