package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/batonlock/baton/benchmarks/internal/report"
)

// writeChart draws cycles/s and the CPU per cycle against the number of
// clients, side by side, and writes base.svg and base.png. Both axes are
// logarithmic: the Ns grow by factors, and a figure that stays flat or
// falls by a factor reads as such whatever its size.
func writeChart(base string, r *result) error {
	rows := r.rows()
	if len(rows) == 0 {
		return fmt.Errorf("nothing measured")
	}
	var ticks []plot.Tick
	for _, rw := range rows {
		ticks = append(ticks, plot.Tick{Value: float64(rw.clients), Label: report.Rate(float64(rw.clients))})
	}
	baton := report.Palette["baton"]
	pale := color.RGBA{R: baton.R/2 + 0x80, G: baton.G/2 + 0x80, B: baton.B/2 + 0x80, A: 0xff}

	cycles := newPanel(fmt.Sprintf("%s/N — cycles/s (median, range; log scales)", r.opts.workload), ticks)
	cycles.Y.Tick.Marker = report.Ticks{Marker: steps125{}, Format: report.Rate}
	var pts plotter.XYs
	var errs plotter.YErrors
	for _, rw := range rows {
		pts = append(pts, plotter.XY{X: float64(rw.clients), Y: rw.cycles})
		errs = append(errs, struct{ Low, High float64 }{rw.cycles - rw.cyclesMin, rw.cyclesMax - rw.cycles})
	}
	if err := addLine(cycles, "", pts, baton, false); err != nil {
		return err
	}
	bars, err := plotter.NewYErrorBars(struct {
		plotter.XYs
		plotter.YErrors
	}{pts, errs})
	if err != nil {
		return err
	}
	bars.LineStyle.Color = baton
	cycles.Add(bars)
	margins(cycles)

	cpu := newPanel(fmt.Sprintf("%s/N — CPU per cycle, µs (median; log scales)", r.opts.workload), ticks)
	cpu.Y.Tick.Marker = report.Ticks{Marker: steps125{}, Format: report.Rate}
	var lead, all plotter.XYs
	for _, rw := range rows {
		if rw.leaderCPU > 0 {
			lead = append(lead, plotter.XY{X: float64(rw.clients), Y: rw.leaderCPU})
		}
		if rw.cpu > 0 {
			all = append(all, plotter.XY{X: float64(rw.clients), Y: rw.cpu})
		}
	}
	tiles := draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 6, PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3,
		PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}
	if len(lead) == 0 && len(all) == 0 { // no /proc: no CPU figures
		tiles.Cols = 1
		return report.WriteCharts(base, [][]*plot.Plot{{cycles}}, tiles, 3.6*vg.Inch, 3*vg.Inch)
	}
	if err := addLine(cpu, "leader", lead, baton, false); err != nil {
		return err
	}
	if err := addLine(cpu, "three servers", all, pale, true); err != nil {
		return err
	}
	cpu.Legend.Top = true
	cpu.Legend.YOffs = -vg.Millimeter * 3 // below the frame's top edge
	cpu.Legend.TextStyle.Font.Size = vg.Points(8)
	margins(cpu)
	return report.WriteCharts(base, [][]*plot.Plot{{cycles, cpu}}, tiles, 2*3.6*vg.Inch, 3*vg.Inch)
}

// newPanel is a plot with the number of clients on a log x axis, ticked
// at the measured Ns.
func newPanel(title string, ticks []plot.Tick) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = "clients (each its own connection and session)"
	p.X.Label.TextStyle.Font.Size = vg.Points(8)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Label.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	return p
}

// addLine adds a line with points; legend names it unless empty.
func addLine(p *plot.Plot, legend string, pts plotter.XYs, c color.RGBA, dashed bool) error {
	if len(pts) == 0 {
		return nil
	}
	l, s, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	l.Color, s.Color = c, c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	s.Shape = draw.CircleGlyph{}
	p.Add(l, s)
	if legend != "" {
		p.Legend.Add(legend, l, s)
	}
	return nil
}

// margins widens both log axes by a factor around the points, so that
// none sits on the frame.
func margins(p *plot.Plot) {
	p.X.Min /= 1.5
	p.X.Max *= 1.5
	p.Y.Min /= 1.5
	p.Y.Max *= 1.5
}

// steps125 ticks a log axis at 1, 2 and 5 times the powers of ten,
// labelled, with unlabelled ticks at the other whole multiples.
type steps125 struct{}

func (steps125) Ticks(min, max float64) []plot.Tick {
	var ts []plot.Tick
	for p := math.Pow(10, math.Floor(math.Log10(min))); p <= max; p *= 10 {
		for k := 1.0; k < 10; k++ {
			v := k * p
			if v < min || v > max {
				continue
			}
			t := plot.Tick{Value: v}
			if k == 1 || k == 2 || k == 5 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}
