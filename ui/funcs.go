package ui

import (
	"html/template"
	"strconv"
	"strings"
	"time"
)

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"age":   age,
	"until": until,
	"utc":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"short": func(s string) string { return clip(s, 120) },
	"count": func(n int64) string { return strconv.FormatInt(n, 10) },
}

// age is how long before now t was, for people; "–" for the zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return seconds(max(now.Sub(t), 0).Seconds())
}

// until is how far after now t is, for people; "now" when past.
func until(t, now time.Time) string {
	if t.IsZero() || !t.After(now) {
		return "now"
	}
	return "in " + seconds(t.Sub(now).Seconds())
}

// clip shortens s to at most n runes, with an ellipsis, for a table cell;
// the whole text goes in the cell's title.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
