-- Drops the dead list's index; the table and its events stay.
DROP INDEX IF EXISTS "outbox_messages_dead_list";
