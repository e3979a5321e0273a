package report

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

func TestFormats(t *testing.T) {
	for _, tt := range []struct {
		got, want string
	}{
		{Rate(0), "0"}, {Rate(12.34), "12.3"}, {Rate(999), "999"}, {Rate(1000), "1,000"}, {Rate(1234567.8), "1,234,568"},
		{MS(0.5312), "0.53 ms"}, {MS(12.34), "12.3 ms"}, {MS(1234.5), "1234 ms"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{3, 1, 2, 10}
	if got := Median(xs); got != 2.5 || xs[0] != 3 {
		t.Errorf("Median = %v, xs now %v", got, xs)
	}
	if Median([]float64{4, 1, 9}) != 4 || Median(nil) != 0 {
		t.Error("Median of an odd count or of none")
	}
}

func TestMachine(t *testing.T) {
	m := Machine{CPU: "Test CPU", Cores: 2, Memory: "1.0 GiB", Kernel: "Linux 6", OS: "Debian", Go: "go1.26"}
	if got, want := m.Table(), "| CPU | cores | memory | kernel | OS | Go |\n|---|---|---|---|---|---|\n| Test CPU | 2 | 1.0 GiB | Linux 6 | Debian | go1.26 |\n"; got != want {
		t.Errorf("Table() = %q, want %q", got, want)
	}
	if p := ProbeMachine(); p.Cores != runtime.NumCPU() || p.Go != runtime.Version() {
		t.Errorf("ProbeMachine() = %+v", p)
	}
	if runtime.GOOS == "linux" && !regexp.MustCompile(`^[\d.]+ [\d.]+ [\d.]+$`).MatchString(LoadAverage()) {
		t.Errorf("LoadAverage() = %q", LoadAverage())
	}
}

func TestWriteChartsAndLogTicks(t *testing.T) {
	p := plot.New()
	p.X.Scale = plot.LogScale{}
	p.X.Min, p.X.Max = 1, 1024
	p.X.Tick.Marker = Ticks{Marker: plot.LogTicks{Prec: -1}, Format: Rate}
	labels := map[string]bool{}
	for _, tk := range p.X.Tick.Marker.Ticks(1, 1024) {
		labels[tk.Label] = true
	}
	if !labels["1"] || !labels["1,000"] {
		t.Errorf("log ticks over 1..1024 are labelled %v", labels)
	}
	base := filepath.Join(t.TempDir(), "c")
	if err := WriteCharts(base, [][]*plot.Plot{{p}}, draw.Tiles{Rows: 1, Cols: 1}, 3*vg.Inch, 2*vg.Inch); err != nil {
		t.Fatal(err)
	}
	for _, ext := range []string{".svg", ".png"} {
		b, err := os.ReadFile(base + ext)
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: %d bytes, %v", ext, len(b), err)
		}
		if ext == ".svg" && !strings.Contains(string(b), "<svg") {
			t.Errorf("%s is not SVG", ext)
		}
	}
}
