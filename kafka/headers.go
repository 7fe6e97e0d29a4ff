package kafka

// Headers the publisher sets on every record, besides the message's own.
const (
	// HeaderID carries the event ID, the consumer's dedup key.
	HeaderID = "Outbox-Id"
	// HeaderType carries Message.Type, when not empty.
	HeaderType = "Outbox-Type"
	// HeaderCreatedAt carries Message.CreatedAt in RFC 3339 with
	// nanoseconds, when not zero.
	HeaderCreatedAt = "Outbox-Created-At"
)

// Headers the subscriber adds to a dead-lettered record, besides the
// original's (the publisher's among them).
const (
	// HeaderError is the error that made the record dead.
	HeaderError = "Outbox-Error"
	// HeaderDeliveries is how many times it was handled.
	HeaderDeliveries = "Outbox-Deliveries"
	// HeaderTopic, HeaderPartition and HeaderOffset locate the original.
	HeaderTopic     = "Outbox-Topic"
	HeaderPartition = "Outbox-Partition"
	HeaderOffset    = "Outbox-Offset"
	// HeaderGroup is the consumer group that gave up on it.
	HeaderGroup = "Outbox-Group"
)
