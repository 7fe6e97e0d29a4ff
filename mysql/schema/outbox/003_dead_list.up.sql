-- The dead list (outbox dead list, Store.Dead) pages dead rows oldest
-- first by (created_at, id), of every topic, from this index: status leads,
-- so the dead rows are one range in list order and a page never reads
-- pending or published rows. MySQL has no ADD INDEX IF NOT EXISTS, so the
-- statement is built only when the index is missing: safe to run again.
SET @outbox_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
        WHERE table_schema = DATABASE() AND table_name = '{{.Table}}' AND index_name = 'dead_list') = 0,
    'ALTER TABLE `{{.Table}}` ADD INDEX dead_list (status, created_at, id)', 'DO 0');
PREPARE outbox_ddl FROM @outbox_ddl;
EXECUTE outbox_ddl;
DEALLOCATE PREPARE outbox_ddl;
