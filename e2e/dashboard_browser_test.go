package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/batonlock/baton"
	"github.com/batonlock/baton/internal/testenv"
)

var dashboardScreenshot = flag.String("e2e.dashboard-screenshot", "",
	"write TestDashboardInBrowser's view of a lock with a holder and waiters to this PNG file (docs/dashboard.png)")

// chromium finds Debian's chromium (.ci/run installs it), or ends the
// test as testenv.Missing says.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	testenv.Missing(t, "chromium is not installed (Debian package chromium)")
	return ""
}

// browser starts a headless chromium for the test and returns a tab's
// context, which ends with the test or after within.
func browser(t *testing.T, within time.Duration) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(1280, 1000),
		// Tests run as root in CI, where chromium's sandbox cannot start.
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
	)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	tab, cancelTab := chromedp.NewContext(alloc, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelTab)
	return tab
}

// waitPage polls the page until the JavaScript expression cond is true.
// A poll the page's reload interrupts (its JavaScript context is gone) is
// made again in the new page.
func waitPage(t *testing.T, tab context.Context, within time.Duration, what, cond string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, err := chromedp.Run(tab, chromedp.Poll[bool](cond, chromedp.WithPollingTimeout(time.Until(deadline)), chromedp.WithPollingInterval(50*time.Millisecond)))
		if err == nil {
			return
		}
		// The page's execution context goes while it reloads (signing
		// in reloads it): poll the new one.
		reloading := strings.Contains(err.Error(), "context") || strings.Contains(err.Error(), "navigated or closed")
		if reloading && tab.Err() == nil && time.Now().Before(deadline) {
			continue
		}
		var shown string
		body, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.body.innerText`))
		if body != "" {
			shown = "\nthe page shows:\n" + body
		}
		t.Fatalf("waiting for %s in the browser: %v%s", what, err, shown)
	}
}

// click clicks the element sel finds, as a user would: again if the page
// replaced it between finding and clicking (it re-renders what changed
// after every applied batch).
func click(t *testing.T, tab context.Context, sel string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := chromedp.Do(tab, chromedp.Click(sel))
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "Could not find node") || time.Now().After(deadline) {
			t.Fatalf("click %s: %v", sel, err)
		}
	}
}

// row is a JavaScript expression: the row of session id in the table sel.
func row(sel string, id uint64) string {
	return fmt.Sprintf(`document.querySelector('%s tbody tr[data-session="%d"]')`, sel, id)
}

// TestDashboardInBrowser drives the dashboard in Debian's chromium: it
// opens the page, sees a lock's holder and its two waiters in order,
// blacklists the holder from the page after the confirmation that names
// it, and sees the lock pass to the first waiter without a reload (the
// page follows the member's feed). Then it restarts the member and sees
// the page connect again and follow the lock to the second waiter.
func TestDashboardInBrowser(t *testing.T) {
	skipShort(t)
	chromium(t)
	c, cl := single(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const lock = "jobs/nightly-report"

	holder := newSession(t, cl, baton.WithOwner("worker-a/4711"), baton.WithTTL(2*time.Second))
	if _, err := holder.Mutex(lock).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	waiters := []*baton.Session{
		newSession(t, cl, baton.WithOwner("worker-b/802")),
		newSession(t, cl, baton.WithOwner("worker-c/95")),
	}
	granted := make([]chan *baton.Lease, len(waiters))
	for i, w := range waiters {
		granted[i] = make(chan *baton.Lease, 1)
		// Queued one after the other, so their order is known.
		go func() {
			l, err := w.Mutex(lock).Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			granted[i] <- l
		}()
		embedWaitQueue(t, cl, lock, i+1)
	}
	// Some other locks for a dashboard that looks like one in use.
	for i, name := range []string{"jobs/invoice-run", "leader/billing", "stock/sku-1042"} {
		s := newSession(t, cl, baton.WithOwner(fmt.Sprintf("svc-%d/%d", i, 100+i)))
		if _, err := s.Mutex(name).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if *dashboardScreenshot != "" {
		screenshotWorkload(t, ctx, cl)
	}

	tab := browser(t, 90*time.Second)
	url := "http://" + c.ClientAddr(0) + "/"
	if err := chromedp.Do(tab, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	waitPage(t, tab, 15*time.Second, "the feed live", `document.querySelector('#conn').textContent.startsWith('live')`)
	waitPage(t, tab, 15*time.Second, "the lock in the list",
		`[...document.querySelectorAll('#locks tbody a')].some(a => a.textContent === '`+lock+`')`)
	click(t, tab, `//a[text()="`+lock+`"]`)
	waitPage(t, tab, 15*time.Second, "the holder and both waiters, in order", fmt.Sprintf(
		`%s !== null && [...document.querySelectorAll('#waiters tbody tr')].map(r => r.dataset.session).join() === '%d,%d'`,
		row("#holders", holder.ID()), waiters[0].ID(), waiters[1].ID()))
	if *dashboardScreenshot != "" {
		png, err := chromedp.Run(tab, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*dashboardScreenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// Blacklist the holder: the confirmation names the session and lock.
	click(t, tab, fmt.Sprintf(`#holders tbody tr[data-session="%d"] button.blacklist`, holder.ID()))
	waitPage(t, tab, 5*time.Second, "the confirmation", `document.querySelector('#confirm').open`)
	what, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#confirm-what').textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("Blacklist session %d (worker-a/4711), holder of %s?", holder.ID(), lock); what != want {
		t.Errorf("confirmation %q, want %q", what, want)
	}
	click(t, tab, `#confirm-ok`)
	waitPage(t, tab, 5*time.Second, "the blacklist made", `document.querySelector('#notice').textContent.startsWith('Blacklisted session')`)
	// The holder's TTL (2 s) runs out, and the lock passes to the first waiter.
	waitPage(t, tab, 20*time.Second, "the lock passed to the first waiter", fmt.Sprintf(
		`%s !== null && %s === null && [...document.querySelectorAll('#waiters tbody tr')].map(r => r.dataset.session).join() === '%d'`,
		row("#holders", waiters[0].ID()), row("#holders", holder.ID()), waiters[1].ID()))
	var first *baton.Lease
	select {
	case first = <-granted[0]:
	case <-time.After(10 * time.Second):
		t.Fatal("the page shows the first waiter holding, but its client was not granted")
	}

	// The member restarts: the page says so, connects again, and goes on
	// following the lock.
	c.Stop(0)
	waitPage(t, tab, 15*time.Second, "the page noticing the restart", `document.querySelector('#conn').textContent.startsWith('reconnecting')`)
	c.Start(0)
	waitPage(t, tab, 30*time.Second, "the feed live again", `document.querySelector('#conn').textContent.startsWith('live')`)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	waitPage(t, tab, 20*time.Second, "the lock passed to the second waiter", fmt.Sprintf(
		`%s !== null && document.querySelectorAll('#waiters tbody tr[data-session]').length === 0`, row("#holders", waiters[1].ID())))
	select {
	case <-granted[1]:
	case <-time.After(10 * time.Second):
		t.Fatal("the page shows the second waiter holding, but its client was not granted")
	}
	if msg, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#error').hidden ? '' : document.querySelector('#error').textContent`)); msg != "" && !strings.Contains(msg, "connect") {
		t.Errorf("the page shows an error: %s", msg)
	}
}

// screenshotWorkload gives the screenshot's charts something to show:
// for 30 s, four workers take turns at one lock, each holding it for a
// moment that grows, so grants fall and waits rise over the run.
func screenshotWorkload(t *testing.T, ctx context.Context, cl *baton.Client) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	done := make(chan struct{})
	for i := range 4 {
		s := newSession(t, cl, baton.WithOwner(fmt.Sprintf("compactor-%d/%d", i, 300+i)))
		go func() {
			defer func() { done <- struct{}{} }()
			for n := 0; time.Now().Before(end); n++ {
				l, err := s.Mutex("jobs/compact").Lock(ctx)
				if err != nil {
					t.Errorf("workload: %v", err)
					return
				}
				<-time.After(time.Duration(5+n/4) * time.Millisecond) // the work under the lock
				if err := l.Release(ctx); err != nil {
					t.Errorf("workload: %v", err)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// embedWaitQueue waits until lock has n waiters.
func embedWaitQueue(t *testing.T, cl *baton.Client, lock string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		info, err := cl.Get(ctx, lock)
		if err == nil && info != nil && len(info.Waiters) == n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never had %d waiters (last: %v, %v)", lock, n, info, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDashboardInBrowserAsUser: with authentication on, the page asks for
// a bearer token; given one in its header field, it reads as that user
// and offers only the actions the user may take: a user who may only
// read sees the holder and no action, root sees both.
func TestDashboardInBrowserAsUser(t *testing.T) {
	skipShort(t)
	chromium(t)
	c, cl := single(t)
	ctx := testCtx(t)
	const lock = "jobs/audit"
	holder := newSession(t, cl, baton.WithOwner("worker-a/1"))
	if _, err := holder.Mutex(lock).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	rootTok, err := cl.AddUser(ctx, "root", true)
	must(err)
	must(cl.GrantRole(ctx, "root", "root"))
	must(cl.AddRole(ctx, "viewer"))
	must(cl.Grant(ctx, "viewer", "", "read"))
	viewerTok, err := cl.AddUser(ctx, "vera", true)
	must(err)
	must(cl.GrantRole(ctx, "vera", "viewer"))
	must(cl.EnableAuth(ctx))

	tab := browser(t, 60*time.Second)
	if err := chromedp.Do(tab, chromedp.Navigate("http://"+c.ClientAddr(0)+"/ui/")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, tab, 15*time.Second, "the page asking for a credential", `document.querySelector('#conn').textContent.includes('bearer token')`)
	for _, tt := range []struct {
		user, token string
		buttons     int
	}{{"vera", viewerTok, 0}, {"root", rootTok, 2}} {
		if err := chromedp.Do(tab,
			chromedp.SendKeys(`#token`, tt.token),
			chromedp.Click(`#signin button`),
		); err != nil {
			t.Fatal(err)
		}
		waitPage(t, tab, 15*time.Second, tt.user+"'s page", `document.querySelector('#you').textContent === 'as `+tt.user+`'`)
		click(t, tab, `//a[text()="`+lock+`"]`)
		waitPage(t, tab, 15*time.Second, tt.user+" seeing the holder", row("#holders", holder.ID())+` !== null`)
		n, err := chromedp.Run(tab, chromedp.Evaluate[int](fmt.Sprintf(`%s.querySelectorAll('button').length`, row("#holders", holder.ID()))))
		if err != nil {
			t.Fatal(err)
		}
		if n != tt.buttons {
			t.Errorf("%s's page offers %d actions on the holder, want %d", tt.user, n, tt.buttons)
		}
	}
}

// TestDashboardReleaseNamesTheHold: the page's conditional release sends
// the holder and token it showed. Confirmed after the lock passed to
// another holder, it releases nothing and says why; confirmed on the
// hold shown, it ends that hold and the lock passes to the waiter.
func TestDashboardReleaseNamesTheHold(t *testing.T) {
	skipShort(t)
	chromium(t)
	c, cl := single(t)
	ctx := testCtx(t)
	const lock = "jobs/rebuild"
	a := newSession(t, cl, baton.WithOwner("worker-a/1"))
	b := newSession(t, cl, baton.WithOwner("worker-b/2"))
	first, err := a.Mutex(lock).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	granted := make(chan *baton.Lease, 1)
	go func() {
		l, err := b.Mutex(lock).Lock(ctx)
		if err != nil {
			t.Errorf("waiter: %v", err)
			return
		}
		granted <- l
	}()
	embedWaitQueue(t, cl, lock, 1)

	tab := browser(t, 60*time.Second)
	if err := chromedp.Do(tab, chromedp.Navigate("http://"+c.ClientAddr(0)+"/ui/")); err != nil {
		t.Fatal(err)
	}
	openRelease := func(s *baton.Session) {
		t.Helper()
		click(t, tab, `//a[text()="`+lock+`"]`)
		waitPage(t, tab, 15*time.Second, "the holder", row("#holders", s.ID())+` !== null`)
		click(t, tab, fmt.Sprintf(`#holders tbody tr[data-session="%d"] button.release`, s.ID()))
		waitPage(t, tab, 5*time.Second, "the confirmation", `document.querySelector('#confirm').open`)
	}

	// The confirmation stays open while a releases and b is granted.
	openRelease(a)
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var second *baton.Lease
	select {
	case second = <-granted:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not granted")
	}
	click(t, tab, `#confirm-ok`)
	waitPage(t, tab, 5*time.Second, "the refusal", `document.querySelector('#notice').className === 'error' && document.querySelector('#notice').textContent.includes('cas-release')`)
	refusal, _ := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector('#notice').textContent`))
	t.Logf("the page says: %s", refusal)
	select {
	case <-second.Lost():
		t.Fatal("a release confirmed for the old holder ended the new holder's hold")
	default:
	}

	// Confirmed on the hold shown, it ends it.
	openRelease(b)
	click(t, tab, `#confirm-ok`)
	select {
	case <-second.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the confirmed release did not end the hold")
	}
	waitPage(t, tab, 10*time.Second, "the lock free", row("#holders", b.ID())+` === null`)
}
