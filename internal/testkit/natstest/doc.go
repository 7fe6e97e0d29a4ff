// Package natstest gives tests a NATS JetStream to talk to: the shared
// server on 127.0.0.1:4222 (OUTBOX_TEST_NATS_URL overrides) with a stream
// of their own, or a private in-process server they may stop and restart.
//
// Tests never stop the shared server; a test that needs an outage, or
// credentials to refuse, starts its own: StartServer, StartServerConfig
// (accounts, users, permissions), StartTokenServer and StartUsersServer.
// NewStream deletes the streams it makes on the shared server at cleanup,
// retrying what a loaded server fails transiently; those of a private
// server go with the server.
package natstest
