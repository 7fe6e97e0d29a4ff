package faults

import "testing"

// TestFaults runs the suite (runFaults) on each pair of database and
// broker: PostgreSQL with every broker, and each other database with NATS
// JetStream.
func TestFaults(t *testing.T) {
	t.Run("postgres+nats", func(t *testing.T) { runFaults(t, newPostgres(t), newNATS(t)) })
	t.Run("postgres+rabbitmq", func(t *testing.T) { runFaults(t, newPostgres(t), newRabbitMQ(t)) })
	t.Run("postgres+kafka", func(t *testing.T) { runFaults(t, newPostgres(t), newKafka(t)) })
	t.Run("postgres+redis", func(t *testing.T) { runFaults(t, newPostgres(t), newRedis(t)) })
	t.Run("postgres+pubsub", func(t *testing.T) {
		db := newPostgres(t)
		runFaults(t, db, newPubsub(t, db))
	})
	t.Run("mariadb+nats", func(t *testing.T) { runFaults(t, newMariaDB(t), newNATS(t)) })
}
