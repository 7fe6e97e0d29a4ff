-- Drops the delayed rows' index; the table and its events stay.
DROP INDEX IF EXISTS "outbox"."messages_delayed";
