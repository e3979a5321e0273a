package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/batonlock/baton/benchmarks/internal/report"
)

// barColor is s's palette colour, halfway to white for the
// shared-connection variant.
func barColor(s system) color.RGBA {
	c := report.Palette[s.name]
	if s.shared {
		c.R, c.G, c.B = c.R/2+0x80, c.G/2+0x80, c.B/2+0x80
	}
	return c
}

// metric is one row of the chart.
type metric struct {
	title  string
	value  func(*result) float64
	format func(float64) string // bar labels
	axis   func(float64) string // tick labels
}

var metrics = []metric{
	{"cycles/s", func(r *result) float64 { return r.report.CyclesPerSec }, report.Rate, report.Rate},
	{"acquire p99 (ms)", func(r *result) float64 { return r.report.AcquireP99 }, report.MS, func(v float64) string { return fmt.Sprintf("%g", v) }},
}

// writeCharts draws one panel per metric (rows) and workload (columns),
// a bar per system, and writes base.svg and base.png.
func writeCharts(base string, d *doc) error {
	rows := make([][]*plot.Plot, len(metrics))
	for i, m := range metrics {
		for _, w := range d.loads {
			p, err := panel(d, m, w)
			if err != nil {
				return err
			}
			rows[i] = append(rows[i], p)
		}
	}
	width := vg.Length(len(d.loads)) * 3.4 * vg.Inch
	height := vg.Length(len(metrics)) * 3 * vg.Inch
	tiles := draw.Tiles{Rows: len(metrics), Cols: len(d.loads), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 3, PadBottom: vg.Millimeter * 3, PadLeft: vg.Millimeter * 3, PadRight: vg.Millimeter * 3}

	return report.WriteCharts(base, rows, tiles, width, height)
}

// panel is the bar chart of metric m under workload w.
func panel(d *doc, m metric, w workload) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s — %s", w, m.title)
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Y.Min = 0
	var names []string
	var xys plotter.XYs
	var labels []string
	for i, s := range d.systems {
		names = append(names, s.title)
		if s.shared {
			names[len(names)-1] += " shared"
		}
		r := d.find(s.id(), w)
		v, label := 0.0, "not run"
		if r != nil && r.report != nil {
			v = m.value(r)
			label = m.format(v)
		}
		bars, err := plotter.NewBarChart(plotter.Values{v}, vg.Points(26))
		if err != nil {
			return nil, err
		}
		bars.XMin = float64(i)
		bars.Color = barColor(s)
		bars.LineStyle.Width = 0
		p.Add(bars)
		xys = append(xys, plotter.XY{X: float64(i), Y: v})
		labels = append(labels, label)
	}
	lbl, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
	if err != nil {
		return nil, err
	}
	for i := range lbl.TextStyle {
		lbl.TextStyle[i].XAlign = text.XCenter
		lbl.TextStyle[i].Font.Size = vg.Points(8)
	}
	lbl.Offset = vg.Point{Y: vg.Points(3)}
	p.Add(lbl)
	p.NominalX(names...)
	p.X.Tick.Label.Font.Size = vg.Points(8)
	p.Y.Tick.Marker = report.Ticks{Format: m.axis}
	// Head room for the value labels.
	p.Y.Max *= 1.15
	if p.Y.Max == 0 {
		p.Y.Max = 1
	}
	return p, nil
}
