-- The enqueue function, for writers in other languages (Ruby, Python, Node,
-- plain SQL): it records one event in the caller's transaction exactly as
-- Outbox.Enqueue does — the same checks, a UUIDv7 ID, the same per-key
-- advisory lock (so a key's events take their seq in commit order, whoever
-- writes them), and a NOTIFY at commit — and returns the event's ID.
--
--   SELECT "outbox"."enqueue"('orders', 'order-42', 'OrderConfirmed',
--       convert_to('{"id":42}', 'UTF8'), '{"trace":"abc"}', NULL);
--
-- topic: required. key: '' (or NULL) for none. type: '' for none. payload:
-- the bytes. headers: a JSON object of string values, or NULL. not_before:
-- publish no earlier than this, or NULL for now. id: the event's ID, for a
-- writer that makes its own (NULL: a new UUIDv7). created_at: NULL for now
-- (the server's clock).
CREATE OR REPLACE FUNCTION "outbox"."enqueue"(
    topic      text,
    key        text        DEFAULT '',
    type       text        DEFAULT '',
    payload    bytea       DEFAULT '\x',
    headers    jsonb       DEFAULT NULL,
    not_before timestamptz DEFAULT NULL,
    id         uuid        DEFAULT NULL,
    created_at timestamptz DEFAULT NULL
) RETURNS uuid LANGUAGE plpgsql VOLATILE AS $enqueue$
#variable_conflict use_variable
DECLARE
    ts  timestamptz := coalesce(created_at, clock_timestamp());
    h   record;
BEGIN
    key := coalesce(key, '');
    type := coalesce(type, '');
    payload := coalesce(payload, '\x'::bytea);
    IF topic IS NULL OR topic = '' THEN
        RAISE EXCEPTION 'outbox: invalid message: empty topic' USING ERRCODE = '22023';
    END IF;
    IF octet_length(topic) > 255 THEN
        RAISE EXCEPTION 'outbox: invalid message: topic is % bytes, limit 255', octet_length(topic) USING ERRCODE = '22023';
    END IF;
    IF octet_length(key) > 255 THEN
        RAISE EXCEPTION 'outbox: invalid message: key is % bytes, limit 255', octet_length(key) USING ERRCODE = '22023';
    END IF;
    IF octet_length(type) > 255 THEN
        RAISE EXCEPTION 'outbox: invalid message: type is % bytes, limit 255', octet_length(type) USING ERRCODE = '22023';
    END IF;
    IF headers IS NOT NULL THEN
        IF jsonb_typeof(headers) <> 'object' THEN
            RAISE EXCEPTION 'outbox: invalid message: headers must be a JSON object, not %', jsonb_typeof(headers) USING ERRCODE = '22023';
        END IF;
        FOR h IN SELECT e.k, e.v FROM jsonb_each(headers) AS e(k, v) LOOP
            IF jsonb_typeof(h.v) <> 'string' THEN
                RAISE EXCEPTION 'outbox: invalid message: header %: the value must be a JSON string', to_json(h.k) USING ERRCODE = '22023';
            END IF;
            IF h.k !~ '^[A-Za-z0-9!#$%&''*+.^_`|~-]+$' THEN
                RAISE EXCEPTION 'outbox: invalid message: header %: a name holds a character outside RFC 9110''s token (letters, digits and !#$%%&''*+-.^_`|~)', to_json(h.k) USING ERRCODE = '22023';
            END IF;
            IF lower(h.k) LIKE 'outbox-%' OR lower(h.k) LIKE 'x-outbox-%' OR lower(h.k) LIKE 'nats-%' THEN
                RAISE EXCEPTION 'outbox: invalid message: header %: names starting with outbox-, x-outbox- or nats- are reserved for the outbox and the brokers', to_json(h.k) USING ERRCODE = '22023';
            END IF;
            IF (h.v #>> '{}') ~ '[\x01-\x08\x0a-\x1f\x7f]' THEN
                RAISE EXCEPTION 'outbox: invalid message: header %: the value holds a control character (CR, LF, …)', to_json(h.k) USING ERRCODE = '22023';
            END IF;
            IF (h.v #>> '{}') ~ '^[ \t]|[ \t]$' THEN
                RAISE EXCEPTION 'outbox: invalid message: header %: the value begins or ends with a space or TAB (header-based brokers trim it)', to_json(h.k) USING ERRCODE = '22023';
            END IF;
        END LOOP;
        IF headers = '{}'::jsonb THEN
            headers := NULL;
        END IF;
    END IF;
    IF key <> '' THEN
        PERFORM pg_advisory_xact_lock(-1662246389, hashtext(key));
    END IF;
    IF id IS NULL THEN
        -- A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random
        -- bits with the version (7) and variant set.
        id := encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
            PLACING substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
            FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid;
    END IF;
    INSERT INTO "outbox"."messages" (id, topic, key, type, payload, headers, created_at, available_at)
        VALUES (id, topic, key, type, payload, headers, ts, greatest(ts, coalesce(not_before, ts)));
    PERFORM pg_notify('outbox_messages', '');
    RETURN id;
END
$enqueue$;
