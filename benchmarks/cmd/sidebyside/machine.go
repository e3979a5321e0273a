package main

import (
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// moduleVersions returns the versions of the Go modules linked into this
// binary, by module path.
func moduleVersions() map[string]string {
	vs := map[string]string{}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			vs[d.Path] = d.Version
		}
	}
	return vs
}

// serverVersion asks scripts/<name>.sh for the installed server's version.
func serverVersion(name string) string {
	cmd := exec.Command("bash", "scripts/"+name+".sh", "version")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(lastLine(string(out)))
}

// cpuBusy samples /proc/stat over d and returns the fraction of all cores'
// time that was not idle: run before a system starts, it shows how much of
// the machine other work was using.
func cpuBusy(d time.Duration) (float64, bool) {
	read := func() (busy, total float64, ok bool) {
		b, err := os.ReadFile("/proc/stat")
		if err != nil {
			return 0, 0, false
		}
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu" {
			return 0, 0, false
		}
		// user nice system idle iowait irq softirq steal; guest time is
		// already counted in user.
		for i, s := range f[1:min(len(f), 9)] {
			v, _ := strconv.ParseFloat(s, 64)
			total += v
			if i != 3 && i != 4 { // idle, iowait
				busy += v
			}
		}
		return busy, total, true
	}
	b0, t0, ok0 := read()
	time.Sleep(d)
	b1, t1, ok1 := read()
	if !ok0 || !ok1 || t1 <= t0 {
		return 0, false
	}
	return (b1 - b0) / (t1 - t0), true
}
