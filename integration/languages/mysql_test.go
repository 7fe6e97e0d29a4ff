package languages

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxgo/outbox"
	"github.com/outboxgo/outbox/internal/testkit/mysqltest"
	"github.com/outboxgo/outbox/internal/testkit/natstest"
	"github.com/outboxgo/outbox/mysql"
	natspub "github.com/outboxgo/outbox/nats"
	"github.com/outboxgo/outbox/relay"
)

// Rails on MySQL/MariaDB (ActiveRecord's mysql2 adapter) writes through the
// outbox_messages_enqueue procedure, two processes racing a Go writer on
// the same keys,
// while a Go relay publishes the database's outbox to NATS: committed
// events arrive once each, rolled-back ones never, each key in its commit
// order.
func TestRailsOnMySQL(t *testing.T) {
	w := writer{name: "ruby", cmd: []string{"ruby"}, script: "ruby/writer.rb",
		check: []string{"ruby", "-e", "require 'active_record'; require 'mysql2'"},
		wants: "Ruby with ActiveRecord and mysql2 (Debian: ruby-activerecord ruby-mysql2)"}
	w.require(t)
	ctx := context.Background()
	db := mysqltest.Open(t)
	var name string
	if err := db.QueryRowContext(ctx, "SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	d, err := mysql.New(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"CREATE TABLE orders (id INT PRIMARY KEY, version INT NOT NULL DEFAULT 0, status VARCHAR(20) NOT NULL DEFAULT 'new')",
		"INSERT INTO orders (id) VALUES (0), (1), (2), (3), (4)",
		"CREATE TABLE ledger (id BIGINT AUTO_INCREMENT PRIMARY KEY, event_id CHAR(32) NOT NULL UNIQUE, `key` VARCHAR(255) NOT NULL, n INT NOT NULL, writer VARCHAR(20) NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	nc := natstest.Connect(t)
	prefix, stream := natstest.NewStream(t, nc)
	pub, err := natspub.NewPublisher(&natspub.PublisherConfig{URL: natstest.URL(), SubjectPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	r, err := relay.New(d.Store(), pub, &relay.Config{PollInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Stop(sctx); err != nil {
			t.Errorf("stop the relay: %v", err)
		}
	})

	// Two Rails processes and a Go writer, all on the same five keys.
	const rubies = 2
	rubyDone := make(chan error, rubies)
	rubyRolled := make([][]uuid.UUID, rubies)
	for i := range rubies {
		go func() {
			var err error
			rubyRolled[i], err = w.runOn(ctx, "mysql2://root@127.0.0.1:3306/"+name, name, fmt.Sprintf("ruby-%d", i), 60, 7, jitterMS)
			rubyDone <- err
		}()
	}
	goRolled, err := mysqlGoWrite(ctx, db, d, 60, 7)
	if err != nil {
		t.Fatal(err)
	}
	for range rubies {
		if err := <-rubyDone; err != nil {
			t.Fatal(err)
		}
	}

	ledger := map[uuid.UUID]ledgerEntry{}
	rows, err := db.QueryContext(ctx, "SELECT event_id, `key`, n, writer FROM ledger")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var hexID string
		var l ledgerEntry
		if err := rows.Scan(&hexID, &l.key, &l.n, &l.writer); err != nil {
			t.Fatal(err)
		}
		id, err := uuid.Parse(hexID)
		if err != nil {
			t.Fatalf("ledger id %q: %v", hexID, err)
		}
		ledger[id] = l
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	checkArrivals(t, natstest.JetStream(t, nc), stream, ledger, append(append(rubyRolled[0], rubyRolled[1]...), goRolled...))
}

// mysqlGoWrite is the Go writer of TestRailsOnMySQL: Enqueue, then the
// order's version, then the ledger, in one transaction.
func mysqlGoWrite(ctx context.Context, db *sql.DB, d *mysql.DB, n, failEvery int) ([]uuid.UUID, error) {
	ob := outbox.New(d, nil)
	var rolled []uuid.UUID
	for i := range n {
		order := i % keys
		key := fmt.Sprintf("order-%d", order)
		id := outbox.NewID()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		payload := fmt.Appendf(nil, `{"order":%d,"writer":"go","i":%d}`, order, i)
		err = ob.Enqueue(ctx, tx, outbox.Message{ID: id, Topic: "orders", Key: key, Type: "OrderConfirmed",
			Payload: payload, Headers: map[string]string{"Writer": "go"}})
		var v int
		if err == nil {
			_, err = tx.ExecContext(ctx, "SELECT SLEEP(? * RAND())", float64(jitterMS)/1000)
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, "UPDATE orders SET version = version + 1, status = 'confirmed' WHERE id = ?", order)
		}
		if err == nil {
			err = tx.QueryRowContext(ctx, "SELECT version FROM orders WHERE id = ?", order).Scan(&v)
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, "INSERT INTO ledger (event_id, `key`, n, writer) VALUES (?, ?, ?, 'go')",
				fmt.Sprintf("%x", id[:]), key, v)
		}
		if err != nil {
			_ = tx.Rollback()
			return nil, err
		}
		if failEvery > 0 && i%failEvery == failEvery-1 {
			if err := tx.Rollback(); err != nil {
				return nil, err
			}
			rolled = append(rolled, id)
			continue
		}
		if err := tx.Commit(); err != nil {
			return nil, err
		}
	}
	return rolled, nil
}
