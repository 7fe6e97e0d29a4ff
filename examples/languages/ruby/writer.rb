# frozen_string_literal: true

# A writer shaped like the use case's Rails code, for the project's tests
# (integration/languages): each transaction confirms an order and enqueues
# OrderConfirmed in the same ActiveRecord transaction block; every
# FAIL_EVERY-th block raises after enqueueing, so its event must never be
# published. It records each committed event in the ledger table with the
# order's new version (taken under the key's lock, so it counts the key's
# commits in order) and prints "rollback ID" for each rolled-back one.
#
# Environment: DATABASE_URL, OUTBOX_SCHEMA, WRITER, N, KEYS, FAIL_EVERY, and
# JITTER_MS: up to this long a pause after enqueueing, so that racing
# writers overtake one another if a key's lock let them.
require "active_record"
require_relative "outbox"

ActiveRecord::Base.establish_connection(ENV.fetch("DATABASE_URL"))

class Order < ActiveRecord::Base
  self.table_name = "#{Outbox.schema}.orders"
end

class LedgerEntry < ActiveRecord::Base
  self.table_name = "#{Outbox.schema}.ledger"
end

class Boom < StandardError; end

writer = ENV.fetch("WRITER", "ruby")
n = Integer(ENV.fetch("N", "20"))
keys = Integer(ENV.fetch("KEYS", "5"))
fail_every = Integer(ENV.fetch("FAIL_EVERY", "0"))
jitter = Float(ENV.fetch("JITTER_MS", "0")) / 1000

n.times do |i|
  order_id = i % keys
  id = nil
  begin
    ActiveRecord::Base.transaction do
      id = Outbox.enqueue(topic: "orders", key: "order-#{order_id}", type: "OrderConfirmed",
                          payload: { order: order_id, writer: writer, i: i }.to_json,
                          headers: { "Writer" => writer })
      if jitter.positive?
        sleep_sql = ActiveRecord::Base.connection.adapter_name.match?(/mysql/i) ? "SELECT SLEEP(#{jitter} * RAND())" : "SELECT pg_sleep(#{jitter} * random())"
        ActiveRecord::Base.connection.execute(sleep_sql)
      end
      order = Order.lock.find(order_id)
      order.update!(version: order.version + 1, status: "confirmed")
      LedgerEntry.create!(event_id: id, key: "order-#{order_id}", n: order.version, writer: writer)
      raise Boom, "rolled back on purpose" if fail_every.positive? && (i % fail_every) == fail_every - 1
    end
  rescue Boom
    puts "rollback #{id}"
  end
end
