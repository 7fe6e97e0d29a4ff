-- Drops the dead list's index (when it is there); the table and its events
-- stay.
SET @outbox_ddl = IF((SELECT COUNT(*) FROM information_schema.statistics
        WHERE table_schema = DATABASE() AND table_name = '{{.Table}}' AND index_name = 'dead_list') > 0,
    'ALTER TABLE `{{.Table}}` DROP INDEX dead_list', 'DO 0');
PREPARE outbox_ddl FROM @outbox_ddl;
EXECUTE outbox_ddl;
DEALLOCATE PREPARE outbox_ddl;
