# The Sidekiq worker of the end-to-end test (e2e_test.go): it runs the
# jobs the relay pushes with the idempotent job of idempotent_job.rb, and
# records what it did in the test's own schema (DATABASE_URL sets its
# search_path).
#
#   REDIS_URL=redis://127.0.0.1:6379/0 SIDEKIQ_NAMESPACE=ns DATABASE_URL=… \
#     sidekiq -r ./testdata/worker.rb -q QUEUE -c 2
# digest/sha2 itself, loaded before Sidekiq starts its threads: "digest"
# alone loads Digest::SHA256 on first use, and two job threads doing that at
# once fail with "Digest::Base cannot be directly inherited in Ruby" (seen
# in CI).
require "digest/sha2"
require_relative "idempotent_job"

Sidekiq.configure_server do |config|
  redis = { url: ENV.fetch("REDIS_URL") }
  redis[:namespace] = ENV["SIDEKIQ_NAMESPACE"] unless ENV.fetch("SIDEKIQ_NAMESPACE", "").empty?
  config.redis = redis
  # Move due jobs of the schedule set about every second (Sidekiq's
  # default is every 5 s, after a first wait of 10 to 15 s).
  config.options[:poll_interval_average] = 1
end

class OutboxE2EJob < IdempotentJob
  sidekiq_options retry: 3

  def handle(tx, payload, meta)
    # The jid the relay derived from the event ID, computed here as
    # docs/sidekiq.md says.
    expected = Digest::SHA256.hexdigest([meta["id"].delete("-")].pack("H*"))[0, 24]
    tx.exec_params(
      "INSERT INTO effects (event_id, jid, jid_ok, n, key, type, trace) VALUES ($1, $2, $3, $4, $5, $6, $7)",
      [meta["id"], jid, jid == expected, payload["n"], meta["key"], meta["type"], meta["headers"]["trace"]]
    )
  end

  def skipped(tx, meta)
    tx.exec_params("INSERT INTO skipped (jid, event_id) VALUES ($1, $2)", [jid, meta["id"]])
  end
end
