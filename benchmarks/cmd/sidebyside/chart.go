package main

import (
	"fmt"
	"image/color"
	"io"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// palette colours systems by name, Baton first and strongest.
var palette = map[string]color.RGBA{
	"baton":     {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"etcd":      {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"zookeeper": {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"redis":     {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"postgres":  {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// barColor is s's palette colour, halfway to white for the
// shared-connection variant.
func barColor(s system) color.RGBA {
	c := palette[s.name]
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
	{"cycles/s", func(r *result) float64 { return r.report.CyclesPerSec }, rate, rate},
	{"acquire p99 (ms)", func(r *result) float64 { return r.report.AcquireP99 }, ms, func(v float64) string { return fmt.Sprintf("%g", v) }},
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

	svg := vgsvg.New(width, height)
	drawAll(rows, tiles, draw.New(svg))
	if err := save(base+".svg", svg); err != nil {
		return err
	}
	png := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(110))}
	drawAll(rows, tiles, draw.New(png))
	return save(base+".png", png)
}

func drawAll(rows [][]*plot.Plot, tiles draw.Tiles, dc draw.Canvas) {
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	cs := plot.Align(rows, tiles, dc)
	for i := range rows {
		for j, p := range rows[i] {
			p.Draw(cs[i][j])
		}
	}
}

func save(path string, c io.WriterTo) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
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
	p.Y.Tick.Marker = ticks{m.axis}
	// Head room for the value labels.
	p.Y.Max *= 1.15
	if p.Y.Max == 0 {
		p.Y.Max = 1
	}
	return p, nil
}

// ticks is plot.DefaultTicks with labels in the chart's number format.
type ticks struct{ format func(float64) string }

func (t ticks) Ticks(min, max float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = t.format(ts[i].Value)
		}
	}
	return ts
}
