// Package subscribers holds the consumer side's broker adapters: each
// package below this one (subscribers/nats, …) receives messages from one
// broker and feeds them to an inbox.Inbox, acknowledging a message only once
// its handler's transaction has committed.
package subscribers
