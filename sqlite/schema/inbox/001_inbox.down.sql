-- Drops the inbox table: every message handled so far would be handled
-- again if redelivered.
DROP TABLE IF EXISTS "{{.Table}}";
