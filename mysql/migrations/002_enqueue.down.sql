-- Drops the enqueue procedure and its key hash; the tables stay.
DROP PROCEDURE IF EXISTS `outbox_messages_enqueue`;
DROP FUNCTION IF EXISTS `outbox_messages_key_hash`;
