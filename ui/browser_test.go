package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/outboxgo/outbox/internal/testenv"
)

// chromiumPath finds the headless browser: OUTBOX_TEST_CHROMIUM, or
// chromium on PATH (Debian's package: apt-get install -y chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("OUTBOX_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	testenv.Unreachable(t, "chromium (apt-get install -y chromium, or set OUTBOX_TEST_CHROMIUM)", exec.ErrNotFound)
	return ""
}

// browser starts a headless chromium with a fresh profile, offline, and
// returns a tab's context; both end at cleanup.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc() // waits for the browser to exit
	})
	// Start the browser now, without a deadline (it would stop the
	// browser), so a broken one fails here.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// run runs steps in the tab, together bounded by waitFor.
func run(t *testing.T, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// value runs one action that returns a value, bounded by waitFor.
func value[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := within(ctx, a, waitFor)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}

// within runs one action bounded by d.
func within[T any](ctx context.Context, a chromedp.Action[T], d time.Duration) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return chromedp.Run(ctx, a)
}

// tryFor bounds one poll of a wait (the wait itself is bounded by waitFor).
const tryFor = 10 * time.Second

// eval evaluates the JavaScript expression expr in the page.
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	return value(t, ctx, chromedp.Evaluate[T](expr))
}

// text is the text of the element selector names ("" when there is none).
func text(t *testing.T, ctx context.Context, selector string) string {
	t.Helper()
	return eval[string](t, ctx, textOf(selector))
}

// textOf is the expression text evaluates.
func textOf(selector string) string {
	return fmt.Sprintf(`(document.querySelector(%q) || {textContent: ""}).textContent.trim()`, selector)
}

// count is how many elements selector matches.
func count(t *testing.T, ctx context.Context, selector string) int {
	t.Helper()
	return eval[int](t, ctx, countOf(selector))
}

// countOf is the expression count evaluates.
func countOf(selector string) string {
	return fmt.Sprintf(`document.querySelectorAll(%q).length`, selector)
}

// click clicks the element selector names, found and clicked in one step
// in the page: the page swaps a section that changed at every refresh, so
// a node found by one call to the browser can be gone at the next. A
// click that submits a form loads the next page; wait for what it shows
// with waitText or waitCount, which poll across the load.
func click(t *testing.T, ctx context.Context, selector string) {
	t.Helper()
	if !eval[bool](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (e) e.click(); return !!e; })()`, selector)) {
		t.Fatalf("nothing to click: no %s in the page", selector)
	}
}

// fill sets the value of the input selector names, found and set in one
// step in the page, for the reason click gives: a node the browser found
// in one call (as chromedp.SetValue finds it) can be gone at the next,
// and setting it then fails with "No node with given id found".
func fill(t *testing.T, ctx context.Context, selector, value string) {
	t.Helper()
	if !eval[bool](t, ctx, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (e) e.value = %q; return !!e; })()`, selector, value)) {
		t.Fatalf("nothing to fill: no %s in the page", selector)
	}
}

// waitText waits until the element selector names shows want (the page
// updates itself, or a submitted form loads the next one).
func waitText(t *testing.T, ctx context.Context, selector, want string) {
	t.Helper()
	waitEval(t, ctx, fmt.Sprintf("%s shows %q", selector, want), textOf(selector), want)
}

// waitCount waits until selector matches n elements.
func waitCount(t *testing.T, ctx context.Context, selector string, n int) {
	t.Helper()
	waitEval(t, ctx, fmt.Sprintf("%d of %s", n, selector), countOf(selector), n)
}

// waitEval waits until the JavaScript expression expr evaluates to want.
// Each poll is bounded by tryFor: while a submitted form loads the next
// page an evaluation can fail or stall, which counts as not yet, and the
// next poll asks the new page.
func waitEval[T comparable](t *testing.T, ctx context.Context, what, expr string, want T) {
	t.Helper()
	waitEvalUntil(t, ctx, what, expr, func(got T) bool { return got == want })
}

// waitEvalUntil waits until expr, evaluated in the page, gives a value
// that ok accepts; an evaluation that fails counts as not yet.
func waitEvalUntil[T any](t *testing.T, ctx context.Context, what, expr string, ok func(T) bool) {
	t.Helper()
	eventually(t, what, func() (bool, string) {
		got, err := within(ctx, chromedp.Evaluate[T](expr), tryFor)
		if err != nil {
			return false, err.Error()
		}
		return ok(got), fmt.Sprintf("%#v", got)
	})
}

// eventually waits until cond holds, failing with what it last said.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last: %s", what, waitFor, last)
		}
		time.Sleep(20 * time.Millisecond) // the polling interval of the wait, bounded by the deadline
	}
}

// screenshot saves the whole page as ui.png under the test's temp dir,
// and to OUTBOX_UI_SCREENSHOT when set (docs/ui.png: see docs/ui.md).
func screenshot(t *testing.T, ctx context.Context) {
	t.Helper()
	png := value(t, ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	paths := []string{filepath.Join(t.TempDir(), "ui.png")}
	if p := os.Getenv("OUTBOX_UI_SCREENSHOT"); p != "" {
		paths = append(paths, p)
	}
	for _, p := range paths {
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", p, len(png))
	}
}
