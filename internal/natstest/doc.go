// Package natstest gives tests a NATS JetStream to talk to: the shared
// server on 127.0.0.1:4222 (OUTBOX_TEST_NATS_URL overrides) with a stream
// of their own, or a private in-process server they may stop and restart.
//
// Tests never stop the shared server; a test that needs an outage starts
// its own with StartServer.
package natstest
