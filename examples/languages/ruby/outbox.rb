# frozen_string_literal: true

# Outbox for Ruby on Rails (ActiveRecord): record an event in the current
# database transaction, to be published by the Go relay after it commits —
# and never if it rolls back.
#
#   ActiveRecord::Base.transaction do
#     order.update!(status: "confirmed")
#     Outbox.enqueue(topic: "orders", key: "order-#{order.id}", type: "OrderConfirmed",
#                    payload: { id: order.id }.to_json)
#   end
#
# On PostgreSQL it calls the outbox.enqueue SQL function, on MySQL/MariaDB
# the outbox_messages_enqueue procedure (both installed by `outbox
# migrate`), which do what the Go library's Enqueue does: the checks, a
# UUIDv7 ID, the per-key lock that keeps a key's events in commit order, and
# (PostgreSQL) the NOTIFY that wakes the relay. It returns the event's ID.
require "json"

module Outbox
  class << self
    # The schema `outbox migrate` used (--schema); "outbox" by default.
    # (MySQL: the database, when it is not the connection's.)
    attr_writer :schema, :table

    def schema
      @schema ||= ENV.fetch("OUTBOX_SCHEMA", "outbox")
    end

    # The outbox table on MySQL/MariaDB (--table); "outbox_messages" by
    # default. Its procedure is <table>_enqueue.
    def table
      @table ||= ENV.fetch("OUTBOX_TABLE", "outbox_messages")
    end

    # Records one event in the connection's current transaction and
    # returns its ID. payload is a String of bytes (JSON, protobuf, …);
    # headers a Hash of String to String; not_before a Time.
    def enqueue(topic:, key: "", type: "", payload: "", headers: nil, not_before: nil,
                connection: ActiveRecord::Base.connection)
      if connection.adapter_name.match?(/mysql/i)
        sql = ActiveRecord::Base.sanitize_sql_array([
          "CALL #{connection.quote_table_name("#{schema}.#{table}_enqueue")}(?, ?, ?, FROM_BASE64(?), ?, ?, NULL, NULL)",
          topic, key, type, [payload.to_s].pack("m0"), headers&.to_json, not_before&.utc&.strftime("%Y-%m-%d %H:%M:%S.%6N")
        ])
        return connection.select_value(sql)
      end
      sql = ActiveRecord::Base.sanitize_sql_array([
        "SELECT #{connection.quote_table_name(schema)}.enqueue(?, ?, ?, decode(?, 'base64'), ?::jsonb, ?::timestamptz)",
        topic, key, type, [payload.to_s].pack("m0"), headers&.to_json, not_before&.utc&.iso8601(6)
      ])
      connection.select_value(sql)
    end
  end
end
