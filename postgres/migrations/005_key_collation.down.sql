-- Keys compare under the database's collation again; the events stay.
ALTER TABLE "outbox"."messages" ALTER COLUMN key TYPE text COLLATE "default";
