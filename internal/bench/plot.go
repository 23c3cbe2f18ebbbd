package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The PNG has two panels, one above the other:
//
//   - latency by percentile, drawn as HdrHistogram's plots draw it: the x
//     axis is 1/(1-p) on a log scale, so 90%, 99%, 99.9%, ... are evenly
//     spaced and the tail gets as much room as the body. The latency axis
//     is logarithmic too, unlike HdrHistogram's: a 0.5 ms median and a
//     150 ms tail are both readable on it;
//   - throughput per second over the whole run (produced and consumed
//     MB/s), with the measured window between dashed lines.

const (
	pngWidth  = 12 * vg.Inch
	pngHeight = 10 * vg.Inch
	pngDPI    = 100
)

var (
	produceColor = color.RGBA{R: 31, G: 119, B: 180, A: 255}  // blue
	consumeColor = color.RGBA{R: 214, G: 39, B: 40, A: 255}   // red
	windowColor  = color.RGBA{R: 110, G: 110, B: 110, A: 255} // grey
	gridColor    = color.RGBA{R: 220, G: 220, B: 220, A: 255}
)

// WritePNG draws the latency percentile curve and the throughput
// timeline to path.
func (r *Result) WritePNG(path string) error {
	data, err := r.renderPNG()
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data)
}

func (r *Result) renderPNG() ([]byte, error) {
	lat, err := r.latencyPlot()
	if err != nil {
		return nil, err
	}
	thr, err := r.throughputPlot()
	if err != nil {
		return nil, err
	}
	img := vgimg.NewWith(vgimg.UseWH(pngWidth, pngHeight), vgimg.UseDPI(pngDPI))
	dc := draw.New(img)
	tiles := draw.Tiles{
		Rows: 2, Cols: 1,
		PadTop: vg.Millimeter * 4, PadBottom: vg.Millimeter * 4,
		PadLeft: vg.Millimeter * 4, PadRight: vg.Millimeter * 6,
		PadY: vg.Millimeter * 10,
	}
	lat.Draw(tiles.At(dc, 0, 0))
	thr.Draw(tiles.At(dc, 0, 1))
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encoding PNG: %w", err)
	}
	return buf.Bytes(), nil
}

func (r *Result) title() string {
	s := fmt.Sprintf("%s on %s", r.Workload.Name, r.System)
	if fp := r.DriverSettings["topic flush.policy"]; fp != "" {
		s += ", flush.policy=" + fp
	}
	return s + ", " + r.Started.Format("2006-01-02 15:04 UTC")
}

func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(15)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(13)
		a.Tick.Label.Font.Size = vg.Points(12)
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(13)
	p.Legend.XOffs, p.Legend.YOffs = vg.Millimeter*3, -vg.Millimeter*2
	p.Legend.Padding = vg.Points(5)
	g := plotter.NewGrid()
	g.Vertical.Color, g.Horizontal.Color = gridColor, gridColor
	p.Add(g)
	return p
}

// percentileX maps a percentile to the plot's x: 1/(1-p). The 100th
// percentile (the maximum) has no finite x; it is drawn one record
// beyond the last finite point, at x = count, where a histogram of
// count records reaches its last value.
func percentileX(percentile float64, count int64, prev float64) float64 {
	if percentile >= 100 {
		return math.Max(float64(count), prev)
	}
	return 1 / (1 - percentile/100)
}

func (r *Result) latencyPlot() (*plot.Plot, error) {
	// No y-axis label: gonum centres it by the axis's arithmetic
	// middle, which on a log axis pushes it (and the whole panel) down.
	// The title says it instead.
	p := newPlot(r.title()+"\nlatency by percentile, ms from each record's intended send time (log scales)",
		"percentile (log scale of 1/(1-p))", "")
	p.X.Scale = plot.LogScale{}
	p.Y.Scale = plot.LogScale{}
	maxX, minY, maxY := 10.0, math.Inf(1), 0.0
	series := []struct {
		name string
		l    *Latency
		c    color.Color
	}{{"produce ack", &r.ProduceLatency, produceColor}, {"end-to-end", r.EndToEndLatency, consumeColor}}
	for _, s := range series {
		if s.l == nil || len(s.l.Percentiles) == 0 {
			continue
		}
		var xys plotter.XYs
		prev := 1.0
		for _, pt := range s.l.Percentiles {
			x := percentileX(pt.Percentile, s.l.Count, prev)
			// A log axis has no 0: the histogram's resolution, 1 µs,
			// stands in for anything below it.
			y := math.Max(pt.ValueMs, minPlotMs)
			xys = append(xys, plotter.XY{X: x, Y: y})
			prev = x
			maxX, minY, maxY = math.Max(maxX, x), math.Min(minY, y), math.Max(maxY, y)
		}
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		line.Color = s.c
		line.Width = vg.Points(2)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s  (p50 %s, p99 %s, p99.9 %s, max %s ms)", s.name, ms(s.l.P50Ms), ms(s.l.P99Ms), ms(s.l.P999Ms), ms(s.l.MaxMs)), line)
	}
	if maxY == 0 { // nothing measured
		minY, maxY = 0.1, 10
	}
	p.X.Min, p.X.Max = 1, maxX
	// Whole decades. A percentile curve only rises, and ends at its
	// maximum, so the bottom right corner is where the legend never
	// covers it. (gonum places a right-hand legend against the canvas
	// edge, outside the x axis's end: the offset brings it in.)
	p.Y.Min = math.Pow(10, math.Floor(math.Log10(minY)))
	p.Y.Max = math.Pow(10, math.Ceil(math.Log10(maxY*1.01)))
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.XOffs, p.Legend.YOffs = -vg.Millimeter*14, vg.Millimeter*3
	p.X.Tick.Marker = percentileTicks{}
	p.Y.Tick.Marker = logTicks{}
	return p, nil
}

const minPlotMs = latencyLowestMicros / microsPerMs

// logTicks labels 1, 2 and 5 of every decade, or only the decades when
// there are more than three.
type logTicks struct{}

func (logTicks) Ticks(min, max float64) []plot.Tick {
	decades := math.Log10(max / min)
	var ticks []plot.Tick
	for decade := math.Pow(10, math.Floor(math.Log10(min))); decade <= max; decade *= 10 {
		for i := 1; i < 10; i++ {
			v := decade * float64(i)
			if v < min*0.9999 || v > max*1.0001 {
				continue
			}
			t := plot.Tick{Value: v}
			if i == 1 || decades <= 3.01 && (i == 2 || i == 5) {
				t.Label = strconv.FormatFloat(v, 'f', -1, 64)
				if decade < 1 {
					t.Label = strconv.FormatFloat(v, 'f', int(-math.Floor(math.Log10(decade))), 64)
				}
			}
			ticks = append(ticks, t)
		}
	}
	return ticks
}

// percentileTicks labels x = 1/(1-p) at 0%, 90%, 99%, 99.9%, ...
type percentileTicks struct{}

func (percentileTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for exp := 0; math.Pow(10, float64(exp)) <= max*1.0001; exp++ {
		x := math.Pow(10, float64(exp))
		if x < min {
			continue
		}
		label := "0%"
		if exp > 0 {
			label = strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.*f", exp, 100-100/x), "0"), ".") + "%"
		}
		ticks = append(ticks, plot.Tick{Value: x, Label: label})
	}
	return ticks
}

func (r *Result) throughputPlot() (*plot.Plot, error) {
	p := newPlot("throughput per second; the measured window is between the dashed lines",
		"seconds since the run started", "MB/s (10^6 bytes of record values)")
	var produced, consumed plotter.XYs
	maxX, maxY := 1.0, 1.0
	for _, s := range r.Timeline {
		produced = append(produced, plotter.XY{X: s.Second, Y: s.ProducedMBPerSecond})
		consumed = append(consumed, plotter.XY{X: s.Second, Y: s.ConsumedMBPerSecond})
		maxX = math.Max(maxX, s.Second)
		maxY = math.Max(maxY, math.Max(s.ProducedMBPerSecond, s.ConsumedMBPerSecond))
	}
	for _, s := range []struct {
		name string
		xys  plotter.XYs
		t    Throughput
		c    color.Color
	}{{"produced", produced, r.Produce, produceColor}, {"consumed", consumed, r.Consume, consumeColor}} {
		line, err := plotter.NewLine(s.xys)
		if err != nil {
			return nil, err
		}
		line.Color = s.c
		line.Width = vg.Points(2)
		p.Add(line)
		p.Legend.Add(fmt.Sprintf("%s  (measured %.1f MB/s, %s records/s)", s.name, s.t.MBPerSecond, count(int64(s.t.RecordsPerSecond+0.5))), line)
	}
	p.Y.Min, p.Y.Max = 0, maxY*1.25 // headroom for the legend
	p.Y.Tick.Marker = plainTicks{}
	// The window's edges; a catch-up run's produce and consume windows
	// differ, so each edge is drawn once.
	var edges []float64
	for _, t := range []Throughput{r.Produce, r.Consume} {
		if t.Seconds > 0 {
			edges = append(edges, t.FromSecond, t.ToSecond)
		}
	}
	seen := map[float64]bool{}
	for _, x := range edges {
		if seen[x] {
			continue
		}
		seen[x] = true
		maxX = math.Max(maxX, x)
		edge, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: p.Y.Max}})
		if err != nil {
			return nil, err
		}
		edge.Color = windowColor
		edge.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		edge.Width = vg.Points(1.5)
		p.Add(edge)
	}
	p.X.Min, p.X.Max = 0, math.Ceil(maxX)
	p.X.Tick.Marker = plainTicks{}
	return p, nil
}

// plainTicks are gonum's default ticks labelled without trailing zeros
// ("750", not "750.00"), with about twice as many labelled.
type plainTicks struct{}

func (plainTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	var major []float64
	for _, t := range ticks {
		if t.Label != "" {
			major = append(major, t.Value)
		}
	}
	// Label the minor tick halfway between two labelled ones too.
	for i := range ticks {
		if ticks[i].Label != "" {
			continue
		}
		for j := 0; j+1 < len(major); j++ {
			if math.Abs(ticks[i].Value-(major[j]+major[j+1])/2) < 1e-9*math.Max(1, math.Abs(max)) {
				ticks[i].Label = "x"
			}
		}
	}
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = strconv.FormatFloat(math.Round(ticks[i].Value*1e6)/1e6, 'f', -1, 64)
		}
	}
	return ticks
}
