package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestServerLogger: --log-format json writes one JSON object a line,
// text key=value pairs; the level filters; a bad format or level is a
// usage error.
func TestServerLogger(t *testing.T) {
	var buf bytes.Buffer
	lg, err := serverLogger(&buf, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	lg.Debug("hidden")
	lg.Info("member started", "client_addr", "127.0.0.1:7700")
	var rec map[string]any
	if err := json.Unmarshal(buf.Bytes(), &rec); err != nil {
		t.Fatalf("json log %q: %v", buf.String(), err)
	}
	if rec["msg"] != "member started" || rec["level"] != "INFO" || rec["client_addr"] != "127.0.0.1:7700" || strings.Count(buf.String(), "\n") != 1 {
		t.Fatalf("json log %q: want one object with msg, level and client_addr", buf.String())
	}

	buf.Reset()
	if lg, err = serverLogger(&buf, "text", "warn"); err != nil {
		t.Fatal(err)
	}
	lg.Info("hidden")
	lg.Warn("slow disk", "peer", 2)
	if got := buf.String(); !strings.Contains(got, `level=WARN msg="slow disk" peer=2`) || strings.Contains(got, "hidden") {
		t.Fatalf("text log %q", got)
	}

	for _, bad := range [][2]string{{"xml", "info"}, {"json", "loud"}} {
		if _, err := serverLogger(&buf, bad[0], bad[1]); err == nil {
			t.Errorf("serverLogger(%q, %q) accepted", bad[0], bad[1])
		}
	}
	if code, stderr := runCaptured(t, "server", "--log-format", "xml"); code != 2 || !strings.HasPrefix(stderr, `baton server: --log-format "xml": want text or json`+"\n") {
		t.Errorf("baton server --log-format xml: exit %d, stderr %q", code, stderr)
	}
}
