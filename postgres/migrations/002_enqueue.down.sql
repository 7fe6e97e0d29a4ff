-- Drops the enqueue function; the table and its events stay.
DROP FUNCTION IF EXISTS "outbox"."enqueue"(text, text, text, bytea, jsonb, timestamptz, uuid, timestamptz);
