// Package hostile holds the hostile input the conformance suites feed every
// backend: strings a header-based broker could alter on the way (trimming,
// folding lines), or a terminal could render as something else.
package hostile

// Strings are valid outbox keys and types (UTF-8, no NUL) that must
// arrive byte for byte: leading and trailing spaces, CR, LF, TAB, terminal
// escapes, non-ASCII and look-alikes of encodings.
var Strings = []string{
	" a", "a ", " padded ", "\ttab", "tab\t", "new\nline", "cr\rlf\r\n", "\r\n",
	"Order\r\nConfirmed", "mid  two  spaces", "žluťoučký kůň ☃", "emoji 🙂", "colon: value",
	"b64:QQ==", "=?utf-8?q?encoded?=", "\x1b[31mred\x1b[0m", "\u00a0nbsp\u00a0", "\x7fdel", "\u2028ls",
}
