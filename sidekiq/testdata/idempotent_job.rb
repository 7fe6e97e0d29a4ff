# An idempotent Sidekiq job for the jobs the outbox relay pushes (see
# docs/sidekiq.md). Sidekiq does not deduplicate by jid, and the relay is
# at-least-once: a job may be pushed twice (a relay that died between
# Redis's reply and marking the event published pushes it again, with the
# same jid). The job records its jid in the same database transaction as
# its effect; a unique index on jid makes the second run a no-op.
#
#   CREATE TABLE sidekiq_processed_jobs (
#     jid          text PRIMARY KEY,   -- the unique index that dedups
#     event_id     uuid NOT NULL,
#     processed_at timestamptz NOT NULL DEFAULT now()
#   );
#
# The outbox pushes args = [payload, meta]: payload is the event's JSON
# (parsed: a Hash, an Array, …) when meta["encoding"] is "json", else a
# base64 string; meta holds "id" (the event ID), "topic", "key", "type",
# "headers" and "encoding".
require "base64"
require "pg"
require "sidekiq"

class IdempotentJob
  include Sidekiq::Worker

  def perform(payload, meta)
    payload = Base64.strict_decode64(payload) if meta["encoding"] == "base64"
    db.transaction do |tx|
      first = tx.exec_params(
        "INSERT INTO sidekiq_processed_jobs (jid, event_id) VALUES ($1, $2) ON CONFLICT (jid) DO NOTHING",
        [jid, meta["id"]]
      ).cmd_tuples == 1
      if first
        handle(tx, payload, meta) # the job's effect, in the same transaction
      else
        skipped(tx, meta)         # done before: nothing to do
      end
    end
  end

  # handle is the job's work; its writes go through tx.
  def handle(tx, payload, meta)
    raise NotImplementedError, "#{self.class} must define handle(tx, payload, meta)"
  end

  # skipped is called for a job whose jid was processed already.
  def skipped(tx, meta)
    logger.info("skipped duplicate job #{jid} of event #{meta["id"]}")
  end

  private

  # db is this thread's connection (Sidekiq runs jobs on several threads).
  def db
    Thread.current[:idempotent_job_db] ||= PG.connect(ENV.fetch("DATABASE_URL"))
  end
end
