-- Keys compare under the database's collation again; the events stay.
ALTER TABLE "{{.Schema}}"."{{.Table}}" ALTER COLUMN key TYPE text COLLATE "default";
