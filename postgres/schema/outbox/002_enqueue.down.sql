-- Drops the enqueue function; the table and its events stay.
DROP FUNCTION IF EXISTS "{{.Schema}}"."{{.Enqueue}}"(text, text, text, bytea, jsonb, timestamptz, uuid, timestamptz);
