-- Drops the dead list's index; the table and its events stay.
DROP INDEX IF EXISTS "{{.Table}}_dead_list";
