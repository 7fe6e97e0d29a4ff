package pgcdc

// SweepSQL is sweepSQL, for the external tests.
var SweepSQL = sweepSQL
