// Package sqlkit holds the SQL mechanics every database backend shares:
// the round-robin key cursor of ordered claims, the JSON form of an ID list,
// the error wrapper that turns a missing table into outbox.ErrSchemaMissing,
// and numbered migrations rendered from templates.
package sqlkit
