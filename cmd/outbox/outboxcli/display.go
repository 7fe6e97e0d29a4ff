package outboxcli

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// display makes s safe for a terminal and a table: a string of printable
// characters (valid UTF-8, letters, marks, numbers, punctuation, symbols
// and the ASCII space) is shown as it is; any other — with a control
// character (ESC, CR, LF, TAB, DEL), another space (NBSP, U+2028), invalid
// UTF-8, a leading or trailing space, or a leading double quote — is shown
// Go-quoted ("new\nline", " a"), so it can neither paint the terminal nor
// fake a row or a column, "a " cannot pass for "a", and a quoted value
// cannot be mistaken for a plain one. JSON output does not use
// it: it carries the exact bytes.
func display(s string) string {
	if strings.HasPrefix(s, `"`) || strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") {
		return strconv.Quote(s)
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
		i += n
	}
	return s
}
