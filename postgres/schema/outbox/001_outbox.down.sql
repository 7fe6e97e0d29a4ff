-- Drops the outbox table with every event in it. The schema is left alone.
DROP TABLE IF EXISTS "{{.Schema}}"."{{.Table}}";
