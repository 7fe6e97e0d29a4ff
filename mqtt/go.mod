module github.com/outboxgo/outbox/mqtt

go 1.26.8

require (
	github.com/eclipse/paho.golang v0.23.0
	github.com/google/uuid v1.6.0
	github.com/outboxgo/outbox v0.1.0
	go.uber.org/goleak v1.3.0
)
