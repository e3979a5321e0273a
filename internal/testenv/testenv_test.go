package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// ending records how Missing ended a test.
type ending struct {
	skipped, failed string
}

func (e *ending) Helper()                           {}
func (e *ending) Skipf(format string, args ...any)  { e.skipped = fmt.Sprintf(format, args...) }
func (e *ending) Fatalf(format string, args ...any) { e.failed = fmt.Sprintf(format, args...) }

func TestMissingSkipsUnlessStrict(t *testing.T) {
	for _, c := range []struct {
		env        string
		skip, fail bool
	}{
		{"", true, false},
		{"0", true, false},
		{"1", false, true},
	} {
		t.Setenv(StrictVar, c.env)
		var e ending
		Missing(&e, "node is not installed: %v", "exec: not found")
		if (e.skipped != "") != c.skip || (e.failed != "") != c.fail {
			t.Errorf("%s=%q: skipped %q, failed %q", StrictVar, c.env, e.skipped, e.failed)
		}
		for _, msg := range []string{e.skipped, e.failed} {
			if msg != "" && !strings.Contains(msg, "node is not installed: exec: not found") {
				t.Errorf("%s=%q: message %q does not say what is missing", StrictVar, c.env, msg)
			}
		}
		if c.fail && !strings.Contains(e.failed, StrictVar+"=1") {
			t.Errorf("failure %q does not name the switch", e.failed)
		}
	}
}
