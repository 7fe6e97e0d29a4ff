-- Drops the outbox table with every event in it.
DROP TABLE IF EXISTS `outbox_messages`;
