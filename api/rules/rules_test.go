package rules

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// check runs one case: want "" means valid, otherwise a substring of the
// message.
func check(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("got %v, want nil", err)
		}
		return
	}
	if err == nil {
		t.Fatalf("got nil, want an error containing %q", want)
	}
	e, ok := errors.AsType[*Error](err)
	if !ok || e.Msg != err.Error() {
		t.Errorf("%#v is not an *Error whose message is its Msg", err)
	}
	if !strings.Contains(err.Error(), want) {
		t.Errorf("got %q, want it to contain %q", err, want)
	}
}

func TestCheckLockName(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		wantErr string
	}{
		{"simple", "jobs/42", ""},
		{"unicode", "verrou/été/🔒", ""},
		{"max length", strings.Repeat("a", MaxNameLen), ""},
		{"empty", "", "lock name is empty"},
		{"too long", strings.Repeat("a", 600), "lock name is 600 bytes; the limit is 512"},
		{"bad utf8", "a\xffb", `lock name "a\xffb" is not valid UTF-8`},
		{"nul", "a\x00b", "control character U+0000 at byte 1"},
		{"newline", "a\nb", "control character U+000A"},
		{"del", "a\x7f", "control character U+007F"},
		{"c1 control", "a\u0085", "control character U+0085"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, CheckLockName(tt.input), tt.wantErr) })
	}
}

func TestCheckLockNames(t *testing.T) {
	many := make([]string, MaxAcquireMany+1)
	for i := range many {
		many[i] = "n" + strconv.Itoa(i)
	}
	tests := []struct {
		name    string
		input   []string
		wantErr string
	}{
		{"one", []string{"a"}, ""},
		{"max", many[:MaxAcquireMany], ""},
		{"none", nil, "acquire_many names no lock"},
		{"too many", many, "acquire_many names 1001 locks; the limit is 1000"},
		{"bad name", []string{"a", "b\xff"}, `lock 2 of 2: lock name "b\xff" is not valid UTF-8`},
		{"twice", []string{"a", "b", "a"}, `lock "a" is named twice (positions 1 and 3)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, CheckLockNames(tt.input), tt.wantErr) })
	}
}

func TestCheckSetModes(t *testing.T) {
	tests := []struct {
		name         string
		names, modes int
		shared       bool
		limit        uint32
		wantErr      string
	}{
		{"no modes", 3, 0, true, 4, ""},
		{"one per lock", 3, 3, false, 0, ""},
		{"too few", 3, 2, false, 0, "acquire_many gives 2 modes for 3 locks; want one per lock, or none"},
		{"too many", 1, 2, false, 0, "gives 2 modes for 1 locks"},
		{"and shared", 2, 2, true, 0, "leave shared and limit unset"},
		{"and limit", 2, 2, false, 3, "leave shared and limit unset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, CheckSetModes(tt.names, tt.modes, tt.shared, tt.limit), tt.wantErr) })
	}
}

func TestCheckOwner(t *testing.T) {
	tests := []struct {
		name    string
		check   func(string) error
		input   string
		wantErr string
	}{
		{"empty", CheckOwner, "", ""},
		{"label", CheckOwner, "host-1/4242/indexer", ""},
		{"max length", CheckOwner, strings.Repeat("o", MaxOwnerLen), ""},
		{"too long", CheckOwner, strings.Repeat("o", MaxOwnerLen+1), "owner is 257 bytes; the limit is 256"},
		{"bad utf8", CheckOwner, "\xc3", `owner "\xc3" is not valid UTF-8`},
		{"key", CheckOwnerKey, "worker-7", ""},
		{"key too long", CheckOwnerKey, strings.Repeat("k", MaxOwnerLen+1), "owner key is 257 bytes; the limit is 256"},
		{"key bad utf8", CheckOwnerKey, "k\xff", `owner key "k\xff" is not valid UTF-8`},
		{"no value", CheckHoldValue, "", ""},
		{"value", CheckHoldValue, "10.0.0.7:8080", ""},
		{"max value", CheckHoldValue, strings.Repeat("v", MaxHoldValueLen), ""},
		{"value too long", CheckHoldValue, strings.Repeat("v", MaxHoldValueLen+1), "hold value is 1025 bytes; the limit is 1024 (rules.MaxHoldValueLen)"},
		{"value bad utf8", CheckHoldValue, "v\xff", `hold value "v\xff" is not valid UTF-8`},
		{"value newline", CheckHoldValue, "a\nb", `hold value "a\nb" has a control character`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.check(tt.input), tt.wantErr) })
	}
}

func TestCheckDurations(t *testing.T) {
	tests := []struct {
		name    string
		check   func(time.Duration) error
		input   time.Duration
		wantErr string
	}{
		{"ttl min", CheckTTL, MinTTL, ""},
		{"ttl default", CheckTTL, DefaultTTL, ""},
		{"ttl max", CheckTTL, MaxTTL, ""},
		{"ttl zero", CheckTTL, 0, "ttl 0s is outside 1s..10m0s"},
		{"ttl below", CheckTTL, MinTTL - 1, "outside"},
		{"ttl above", CheckTTL, MaxTTL + 1, "outside"},
		{"ttl negative", CheckTTL, -time.Second, "outside"},
		{"hold limit none", CheckHoldLimit, 0, ""},
		{"hold limit min", CheckHoldLimit, MinHoldLimit, ""},
		{"hold limit max", CheckHoldLimit, MaxHoldLimit, ""},
		{"hold limit short", CheckHoldLimit, 10 * time.Millisecond, "hold limit 10ms is outside 1s..24h0m0s"},
		{"hold limit long", CheckHoldLimit, MaxHoldLimit + time.Millisecond, "outside"},
		{"hold limit fraction", CheckHoldLimit, time.Second + time.Microsecond, "hold limit 1.000001s is not a whole number of milliseconds"},
		{"lock-delay none", CheckLockDelay, 0, ""},
		{"lock-delay max", CheckLockDelay, MaxLockDelay, ""},
		{"lock-delay long", CheckLockDelay, MaxLockDelay + time.Second, "lock-delay 1m1s is outside 0s..1m0s"},
		{"lock-delay negative", CheckLockDelay, -time.Second, "outside"},
		{"lock-delay fraction", CheckLockDelay, 1500 * time.Millisecond, "lock-delay 1.5s is not a whole number of seconds"},
		{"revoke grace min", CheckRevokeGrace, MinRevokeGrace, ""},
		{"revoke grace max", CheckRevokeGrace, MaxRevokeGrace, ""},
		{"revoke grace none", CheckRevokeGrace, 0, "revoke grace 0s is outside 1s..1h0m0s"},
		{"revoke grace long", CheckRevokeGrace, MaxRevokeGrace + time.Millisecond, "outside"},
		{"revoke grace fraction", CheckRevokeGrace, 1500*time.Millisecond + time.Microsecond, "not a whole number of milliseconds"},
		{"key retention none", CheckKeyRetention, 0, ""},
		{"key retention default", CheckKeyRetention, DefaultKeyRetention, ""},
		{"key retention max", CheckKeyRetention, MaxKeyRetention, ""},
		{"key retention long", CheckKeyRetention, MaxKeyRetention + 1, "key retention 720h0m0.000000001s is outside 0s..720h0m0s"},
		{"key retention negative", CheckKeyRetention, -time.Second, "outside"},
		{"wait", CheckWaitTimeout, time.Second, ""},
		{"wait max", CheckWaitTimeout, MaxWaitTimeout, ""},
		{"wait zero", CheckWaitTimeout, 0, "wait timeout 0s is outside (0s, 24h0m0s]"},
		{"wait negative", CheckWaitTimeout, -time.Second, "outside"},
		{"wait long", CheckWaitTimeout, MaxWaitTimeout + 1, "outside"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.check(tt.input), tt.wantErr) })
	}
}

// TestNanosForms: the checks of durations in nanoseconds refuse exactly
// what the checks of time.Durations refuse, in the same words, and
// FormatNanos quotes as they do.
func TestNanosForms(t *testing.T) {
	for _, d := range []time.Duration{0, 1, -1, -time.Second, time.Millisecond, MinTTL - 1, MinTTL, DefaultTTL, MaxTTL, MaxTTL + 1,
		MinHoldLimit, time.Second + time.Microsecond, 90 * time.Second, MaxHoldLimit, MaxHoldLimit + time.Millisecond, 1<<63 - 1} {
		for _, c := range []struct {
			name        string
			nanos, want error
		}{
			{"CheckTTLNanos", CheckTTLNanos(int64(d)), CheckTTL(d)},
			{"CheckHoldLimitNanos", CheckHoldLimitNanos(int64(d)), CheckHoldLimit(d)},
			{"CheckLockDelayNanos", CheckLockDelayNanos(int64(d)), CheckLockDelay(d)},
			{"CheckRevokeGraceNanos", CheckRevokeGraceNanos(int64(d)), CheckRevokeGrace(d)},
			{"CheckKeyRetentionNanos", CheckKeyRetentionNanos(int64(d)), CheckKeyRetention(d)},
		} {
			if fmt.Sprint(c.nanos) != fmt.Sprint(c.want) {
				t.Errorf("%s(%d) = %v; for a time.Duration %v", c.name, int64(d), c.nanos, c.want)
			}
		}
		if got := FormatNanos(int64(d)); got != d.String() {
			t.Errorf("FormatNanos(%d) = %q, want %q", int64(d), got, d.String())
		}
	}
}

func TestCheckHolderLimit(t *testing.T) {
	check(t, CheckHolderLimit(0), "")
	check(t, CheckHolderLimit(MaxHoldersPerLock), "")
	check(t, CheckHolderLimit(MaxHoldersPerLock+1), "holder limit 10001 is over the maximum 10000")
}

func TestCheckStrings(t *testing.T) {
	tests := []struct {
		name    string
		check   func(string) error
		input   string
		wantErr string
	}{
		{"secret", CheckSecret, strings.Repeat("s", MinSecretLen), ""},
		{"secret max", CheckSecret, strings.Repeat("s", MaxSecretLen), ""},
		{"secret short", CheckSecret, "short", "secret is 5 characters; a session secret has 22 to 128"},
		{"secret long", CheckSecret, strings.Repeat("s", MaxSecretLen+1), "secret is 129 characters"},
		{"secret space", CheckSecret, strings.Repeat("s", 30) + " ", "not printable ASCII at byte 30"},
		{"secret utf8", CheckSecret, strings.Repeat("s", 30) + "é", "not printable ASCII at byte 30"},
		{"prefix empty", CheckPrefix, "", ""},
		{"prefix", CheckPrefix, "jobs/", ""},
		{"prefix long", CheckPrefix, strings.Repeat("p", MaxNameLen+1), "prefix is 513 bytes; the limit is 512"},
		{"prefix utf8", CheckPrefix, "jobs/\xff", `prefix "jobs/\xff" is not valid UTF-8`},
		{"member", CheckMemberName, "n1.east_2-b", ""},
		{"member empty", CheckMemberName, "", `member name "": want 1..64 characters`},
		{"member long", CheckMemberName, strings.Repeat("m", 65), "want 1..64 characters"},
		{"member slash", CheckMemberName, "n/1", `member name "n/1": only letters, digits`},
		{"member utf8", CheckMemberName, "n\xff", "only letters, digits"},
		{"peer", CheckPeerAddr, "10.0.0.1:2380", ""},
		{"peer name", CheckPeerAddr, "n1.example:2380", ""},
		{"peer ipv6", CheckPeerAddr, "[::1]:2380", ""},
		{"peer no port", CheckPeerAddr, "10.0.0.1", `peer address "10.0.0.1": want host:port`},
		{"peer no host", CheckPeerAddr, ":2380", "want host:port"},
		{"peer port 0", CheckPeerAddr, "h:0", `peer address "h:0": port must be 1..65535`},
		{"peer port big", CheckPeerAddr, "h:65536", "port must be 1..65535"},
		{"peer port name", CheckPeerAddr, "h:http", "port must be 1..65535"},
		{"client", CheckClientAddr, "10.0.0.1:7700", ""},
		{"client name", CheckClientAddr, "n1.example:7700", ""},
		{"client ipv6", CheckClientAddr, "[2001:db8::1]:7700", ""},
		{"client no port", CheckClientAddr, "10.0.0.1", `client address "10.0.0.1": want host:port`},
		{"client no host", CheckClientAddr, ":7700", "want host:port"},
		{"client port 0", CheckClientAddr, "h:0", "port must be 1..65535"},
		{"client any v4", CheckClientAddr, "0.0.0.0:7700", "0.0.0.0 is every address of the machine"},
		{"client any v6", CheckClientAddr, "[::]:7700", ":: is every address of the machine"},
		{"client any v6 long", CheckClientAddr, "[0:0:0:0:0:0:0:0]:7700", "is every address of the machine"},
		{"client v6 loopback", CheckClientAddr, "[::1]:7700", ""},
		{"client v4 zero net", CheckClientAddr, "0.0.0.1:7700", ""},
		{"peer utf8", CheckPeerAddr, "h\xff:80", "want host:port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { check(t, tt.check(tt.input), tt.wantErr) })
	}
}

// TestSplitHostPort: splitHostPort agrees with net.SplitHostPort.
func TestSplitHostPort(t *testing.T) {
	for _, in := range []string{
		"", ":", "h:1", "h:", ":1", "h", "h:1:2", "[::1]:80", "[::1]", "[::1]80", "[::1]:", "[]:80",
		"[::1]::80", "[::1]x:80", "[h:80", "h]:80", "a[b:80", "[a]b]:80", "[a[b]:80", "h:[80", "h:]80",
		"[fe80::1%eth0]:2380", "example.com:2380",
	} {
		host, port, ok := splitHostPort(in)
		wantHost, wantPort, err := net.SplitHostPort(in)
		if ok != (err == nil) || ok && (host != wantHost || port != wantPort) {
			t.Errorf("splitHostPort(%q) = %q, %q, %v; net.SplitHostPort: %q, %q, %v", in, host, port, ok, wantHost, wantPort, err)
		}
	}
}
