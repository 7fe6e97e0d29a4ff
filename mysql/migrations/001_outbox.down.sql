-- Drops the outbox table with every event in it, and its key-lock table.
DROP TABLE IF EXISTS `outbox_messages`;
DROP TABLE IF EXISTS `outbox_messages_keys`;
