-- Drops the dead list's index; the table and its events stay.
DROP INDEX IF EXISTS "{{.Schema}}"."{{.Table}}_dead_list";
