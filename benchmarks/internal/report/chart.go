package report

import (
	"fmt"
	"image/color"
	"io"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Palette colours systems by name, Baton first and strongest.
var Palette = map[string]color.RGBA{
	"baton":     {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"etcd":      {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"zookeeper": {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"redis":     {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	"postgres":  {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

// WriteCharts draws plots, a grid of rows laid out by tiles, on a white
// page of width by height, and writes it as base.svg and base.png.
func WriteCharts(base string, rows [][]*plot.Plot, tiles draw.Tiles, width, height vg.Length) error {
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

// Ticks is a tick marker with its labels in a chart's number format:
// Marker's ticks (plot.DefaultTicks if nil) relabelled by Format.
type Ticks struct {
	Marker plot.Ticker
	Format func(float64) string
}

// Ticks implements plot.Ticker.
func (t Ticks) Ticks(min, max float64) []plot.Tick {
	var m plot.Ticker = plot.DefaultTicks{}
	if t.Marker != nil {
		m = t.Marker
	}
	ts := m.Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = t.Format(ts[i].Value)
		}
	}
	return ts
}
