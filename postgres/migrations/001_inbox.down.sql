-- Drops the inbox table: every message handled so far would be handled
-- again if redelivered. The schema is left alone.
DROP TABLE IF EXISTS "outbox"."inbox";
