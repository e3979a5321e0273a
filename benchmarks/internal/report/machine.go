// Package report holds what the benchmark commands' Markdown reports and
// charts share: the description of the machine a run happened on, the
// number formats of tables and charts, and the charts' colours and
// files (gonum/plot, written as SVG and PNG).
package report

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where a run happened.
type Machine struct {
	CPU    string
	Cores  int
	Memory string
	Kernel string
	OS     string
	Go     string // the Go of this command
}

// ProbeMachine reads this machine's description from /proc and
// /etc/os-release; what it cannot read is "unknown".
func ProbeMachine() Machine {
	m := Machine{CPU: "unknown", Cores: runtime.NumCPU(), Memory: "unknown", Kernel: "unknown", OS: "unknown", Go: runtime.Version()}
	if v := procField("/proc/cpuinfo", "model name", ":"); v != "" {
		m.CPU = v
	}
	if v := procField("/proc/meminfo", "MemTotal", ":"); v != "" {
		if kb, err := strconv.ParseFloat(strings.Fields(v)[0], 64); err == nil {
			m.Memory = fmt.Sprintf("%.1f GiB", kb/(1<<20))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if v := procField("/etc/os-release", "PRETTY_NAME", "="); v != "" {
		m.OS = strings.Trim(v, `"`)
	}
	return m
}

// Table is m as a Markdown table: a header row and one row.
func (m Machine) Table() string {
	return fmt.Sprintf("| CPU | cores | memory | kernel | OS | Go |\n|---|---|---|---|---|---|\n| %s | %d | %s | %s | %s | %s |\n",
		m.CPU, m.Cores, m.Memory, m.Kernel, m.OS, m.Go)
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages as
// /proc/loadavg has them ("2.69 4.93 4.02"), or "unknown".
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// procField returns the value of the first "key<sep>value" line of file.
func procField(file, key, sep string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
