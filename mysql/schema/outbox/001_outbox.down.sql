-- Drops the outbox table with every event in it, and its key-lock table.
DROP TABLE IF EXISTS `{{.Table}}`;
DROP TABLE IF EXISTS `{{.Keys}}`;
