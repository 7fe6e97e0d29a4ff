-- The enqueue procedure, for writers in other languages (Ruby, Python,
-- Node, plain SQL): it records one event in the caller's transaction exactly
-- as Outbox.Enqueue does — the same checks, a UUIDv7 ID, the same per-key
-- lock (an upsert of the key's row in the key-lock table, so a key's events
-- take their seq in commit order, whoever writes them) — and returns the
-- event's ID, as a one-row result (id, 32 hex digits) and in @outbox_id.
--
--   CALL `{{.Enqueue}}`('orders', 'order-42', 'OrderConfirmed', '{"id":42}', NULL, NULL, NULL, NULL);
--
-- topic: required. key: '' (or NULL) for none. type: '' for none. payload:
-- the bytes. headers: a JSON object of string values, or NULL. not_before:
-- publish no earlier than this (UTC), or NULL for now. event_id: the
-- event's ID (16 bytes), for a writer that makes its own, or NULL for a new
-- UUIDv7. created: NULL for now (UTC, the server's clock).
--
-- The DELIMITER lines are for the mysql client; Migrate reads them too.
DELIMITER //
CREATE FUNCTION IF NOT EXISTS `{{.KeyHash}}`(k VARBINARY(1020)) RETURNS BIGINT
    DETERMINISTIC NO SQL
    COMMENT 'The key-lock row of a key: the 64-bit FNV-1a hash of its bytes, as Enqueue computes it'
BEGIN
    DECLARE h DECIMAL(20, 0) DEFAULT 14695981039346656037;
    DECLARE i INT DEFAULT 1;
    WHILE i <= LENGTH(k) DO
        SET h = CAST(h AS UNSIGNED) ^ ASCII(SUBSTRING(k, i, 1));
        SET h = MOD(h * 1099511628211, 18446744073709551616);
        SET i = i + 1;
    END WHILE;
    IF h >= 9223372036854775808 THEN
        RETURN h - 18446744073709551616;
    END IF;
    RETURN h;
END //
CREATE PROCEDURE IF NOT EXISTS `{{.Enqueue}}`(
    IN topic      VARCHAR(255),
    IN `key`      VARCHAR(255),
    IN type       VARCHAR(255),
    IN payload    LONGBLOB,
    IN headers    JSON,
    IN not_before DATETIME(6),
    IN event_id   BINARY(16),
    IN created    DATETIME(6)
)
    MODIFIES SQL DATA
    COMMENT 'Enqueues one outbox event in the caller''s transaction, as Outbox.Enqueue does'
BEGIN
    DECLARE ts DATETIME(6) DEFAULT COALESCE(created, UTC_TIMESTAMP(6));
    DECLARE ms BIGINT DEFAULT FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000);
    DECLARE r BINARY(10) DEFAULT RANDOM_BYTES(10);
    DECLARE id BINARY(16) DEFAULT event_id;
    DECLARE hnames JSON;
    DECLARE hname, hval LONGTEXT;
    DECLARE i INT DEFAULT 0;
    SET `key` = COALESCE(`key`, ''), type = COALESCE(type, ''), payload = COALESCE(payload, '');
    IF topic IS NULL OR topic = '' THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'outbox: invalid message: empty topic';
    END IF;
    IF LENGTH(topic) > 255 OR LENGTH(`key`) > 255 OR LENGTH(type) > 255 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'outbox: invalid message: a topic, key or type over 255 bytes';
    END IF;
    IF LOCATE(CHAR(0 USING utf8mb4), CONCAT(topic, `key`, type)) > 0 THEN
        SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'outbox: invalid message: a topic, key or type holds a NUL byte';
    END IF;
    IF headers IS NOT NULL THEN
        IF JSON_TYPE(headers) <> 'OBJECT' THEN
            SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = 'outbox: invalid message: headers must be a JSON object';
        END IF;
        SET hnames = JSON_KEYS(headers);
        WHILE i < JSON_LENGTH(hnames) DO
            SET hname = JSON_UNQUOTE(JSON_EXTRACT(hnames, CONCAT('$[', i, ']')));
            IF hname NOT REGEXP '^[A-Za-z0-9!#$%&''*+.^_`|~-]+$' THEN
                SET @outbox_error = CONCAT('outbox: invalid message: header ', JSON_QUOTE(hname),
                    ': a name holds a character outside RFC 9110''s token (letters, digits and !#$%&''*+-.^_`|~)');
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = @outbox_error;
            END IF;
            IF LOWER(hname) LIKE 'outbox-%' OR LOWER(hname) LIKE 'x-outbox-%' OR LOWER(hname) LIKE 'nats-%' THEN
                SET @outbox_error = CONCAT('outbox: invalid message: header ', JSON_QUOTE(hname),
                    ': names starting with outbox-, x-outbox- or nats- are reserved for the outbox and the brokers');
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = @outbox_error;
            END IF;
            IF JSON_TYPE(JSON_EXTRACT(headers, CONCAT('$."', hname, '"'))) <> 'STRING' THEN
                SET @outbox_error = CONCAT('outbox: invalid message: header ', JSON_QUOTE(hname), ': the value must be a JSON string');
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = @outbox_error;
            END IF;
            SET hval = JSON_UNQUOTE(JSON_EXTRACT(headers, CONCAT('$."', hname, '"')));
            IF hval REGEXP '[\\x{00}-\\x{08}\\x{0a}-\\x{1f}\\x{7f}]' THEN
                SET @outbox_error = CONCAT('outbox: invalid message: header ', JSON_QUOTE(hname), ': the value holds a control character (CR, LF, …)');
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = @outbox_error;
            END IF;
            IF hval REGEXP '^[ \t]|[ \t]$' THEN
                SET @outbox_error = CONCAT('outbox: invalid message: header ', JSON_QUOTE(hname),
                    ': the value begins or ends with a space or TAB (header-based brokers trim it)');
                SIGNAL SQLSTATE '22023' SET MESSAGE_TEXT = @outbox_error;
            END IF;
            SET i = i + 1;
        END WHILE;
        IF JSON_LENGTH(headers) = 0 THEN
            SET headers = NULL;
        END IF;
    END IF;
    IF `key` <> '' THEN
        INSERT INTO `{{.Keys}}` (key_hash, n) VALUES (`{{.KeyHash}}`(CAST(`key` AS BINARY)), 1)
            ON DUPLICATE KEY UPDATE n = n + 1;
    END IF;
    IF id IS NULL THEN
        -- A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random
        -- bits with the version (7) and variant set.
        SET id = CONCAT(UNHEX(LPAD(HEX(ms), 12, '0')),
            CHAR(0x70 | (ASCII(SUBSTRING(r, 1, 1)) & 0x0F)), SUBSTRING(r, 2, 1),
            CHAR(0x80 | (ASCII(SUBSTRING(r, 3, 1)) & 0x3F)), SUBSTRING(r, 4, 7));
    END IF;
    INSERT INTO `{{.Table}}` (id, topic, `key`, type, payload, headers, created_at, available_at)
        VALUES (id, topic, `key`, type, payload, headers, ts, GREATEST(ts, COALESCE(not_before, ts)));
    SET @outbox_id = LOWER(HEX(id));
    SELECT @outbox_id AS id;
END //
DELIMITER ;
