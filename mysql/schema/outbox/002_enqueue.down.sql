-- Drops the enqueue procedure and its key hash; the tables stay.
DROP PROCEDURE IF EXISTS `{{.Enqueue}}`;
DROP FUNCTION IF EXISTS `{{.KeyHash}}`;
