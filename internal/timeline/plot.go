package timeline

import (
	"bufio"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The drawing: what the package doc shows, laid out by hand rather than
// with plot.Align, which gives every panel the same height. The first
// panel is taller because its top holds the fault labels.

const (
	// The bench's size and resolution, so the two kinds of report read
	// alike side by side.
	pngWidth  = 12 * vg.Inch
	pngHeight = 10 * vg.Inch
	pngDPI    = 100

	// legendWidth is kept to the right of every panel for its legend.
	// Inside the data area a legend covered the lines it named, or the
	// fault labels at the top of the first panel.
	legendWidth = 2.4 * vg.Inch
	panelGap    = 4 * vg.Millimeter
	margin      = 4 * vg.Millimeter
)

var (
	acknowledgedColor = color.NRGBA{R: 31, G: 119, B: 180, A: 255} // blue
	failedColor       = color.NRGBA{R: 214, G: 39, B: 40, A: 255}  // red
	maxColor          = color.NRGBA{R: 90, G: 90, B: 90, A: 255}   // dark grey
	gridColor         = color.NRGBA{R: 225, G: 225, B: 225, A: 255}
	// seriesColors are the error series' colours, in turn, after the
	// failed writes' red: none is a fault family's.
	seriesColors = []color.NRGBA{
		{R: 140, G: 86, B: 75, A: 255},   // brown
		{R: 23, G: 190, B: 207, A: 255},  // cyan
		{R: 227, G: 119, B: 194, A: 255}, // pink
		{R: 188, G: 189, B: 34, A: 255},  // olive
		{R: 0, G: 0, B: 0, A: 255},       // black
	}
)

// WritePNG draws the timeline to path, with title on top. The file is
// written whole or not at all (a temporary file beside it, renamed over
// it), so a reader never sees half a PNG and a failed write leaves
// nothing behind.
func (t *Timeline) WritePNG(path, title string) error {
	seconds, faults := t.snapshot()
	return writeFileAtomically(path, func(w io.Writer) error {
		return render(w, seconds, faults, title)
	})
}

// writeFileAtomically writes what write writes to a temporary file in
// path's directory, then renames it to path; on an error it removes the
// temporary file.
func writeFileAtomically(path string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close() // may be the second Close: its error says nothing new
			os.Remove(f.Name())
		}
	}()
	// CreateTemp makes the file 0600; a report is for whoever may read
	// its directory.
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	buffered := bufio.NewWriter(f)
	if err = write(buffered); err != nil {
		return err
	}
	if err = buffered.Flush(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// render draws seconds and faults (sorted by start) as the PNG the
// package doc describes, to w.
func render(w io.Writer, seconds []Second, faults []Fault, title string) error {
	img := vgimg.NewWith(vgimg.UseWH(pngWidth, pngHeight), vgimg.UseDPI(pngDPI))
	dc := draw.New(img)
	body := drawTitle(dc, title)
	if len(seconds) == 0 && len(faults) == 0 {
		style := textStyle(14)
		style.XAlign, style.YAlign = draw.XCenter, draw.YCenter
		body.FillText(style, body.Center(), "nothing was recorded: no writes, errors or faults")
	} else {
		drawPanels(body, seconds, faults)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(w); err != nil {
		return fmt.Errorf("encoding PNG: %w", err)
	}
	return nil
}

func textStyle(size vg.Length) text.Style {
	return text.Style{
		Color:   color.Black,
		Font:    font.From(plot.DefaultFont, size),
		XAlign:  draw.XLeft,
		YAlign:  draw.YTop,
		Handler: plot.DefaultTextHandler,
	}
}

// drawTitle writes title centred at the top of dc and returns the rest
// of dc, within the margins.
func drawTitle(dc draw.Canvas, title string) draw.Canvas {
	body := draw.Crop(dc, margin, -margin, margin, -margin)
	if title == "" {
		return body
	}
	style := textStyle(16)
	style.XAlign = draw.XCenter
	body.FillText(style, vg.Point{X: body.Center().X, Y: body.Max.Y}, title)
	return draw.Crop(body, 0, 0, 0, -(style.Height(title) + panelGap))
}

// panel is one of the stacked plots and its legend.
type panel struct {
	plot   *plot.Plot
	legend plot.Legend
	// weight is the panel's share of the height.
	weight float64
}

func drawPanels(body draw.Canvas, seconds []Second, faults []Fault) {
	panels, canvases, _ := layoutPanels(draw.Crop(body, 0, -legendWidth, 0, 0), seconds, faults)
	for i, p := range panels {
		p.plot.Draw(canvases[i])
		data := p.plot.DataCanvas(canvases[i])
		legendArea := draw.Canvas{Canvas: body.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: data.Max.X + 6*vg.Millimeter, Y: data.Min.Y},
			Max: vg.Point{X: body.Max.X, Y: data.Max.Y},
		}}
		p.legend.Draw(legendArea)
	}
}

// layoutPanels builds the three panels and stacks them in area; labels
// are the fault labels it placed in the first.
func layoutPanels(area draw.Canvas, seconds []Second, faults []Fault) (panels []panel, canvases []draw.Canvas, labels *faultLabels) {
	xMax := float64(max(len(seconds), 1))
	throughput, throughputMax := throughputPanel(seconds)
	panels = []panel{throughput, latencyPanel(seconds), errorsPanel(seconds)}
	for i := range panels {
		p := panels[i].plot
		p.X.Min, p.X.Max = 0, xMax
		p.X.Tick.Marker = secondTicks{}
		p.Add(faultSpans{faults: faults})
	}
	addFamilies(&panels[0].legend, faults)
	panels[len(panels)-1].plot.X.Label.Text = "seconds since the run started"

	// Place the fault labels against the first panel's data area as
	// stacked, then give the panel the headroom they take and stack
	// again: the headroom can change the y tick labels' width, which
	// labelGap absorbs.
	canvases = stack(panels, area)
	labels = placeLabels(faults, panels[0].plot, canvases[0])
	top := panels[0].plot
	top.Y.Max = throughputMax / (1 - labels.bandShare)
	if labels.unlabelled > 0 {
		// On the title's line: a second line would shrink the data area
		// the labels were just placed in.
		top.Title.Text += fmt.Sprintf("; %d of %d faults unlabelled, too close together", labels.unlabelled, len(faults))
	}
	top.Add(labels)
	return panels, stack(panels, area), labels
}

// newPanel returns a plot in the house style (the bench's sizes, grid
// and fonts) and an empty legend for the right of it.
func newPanel(title string, weight float64) panel {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.X.Tick.Label.Font.Size = vg.Points(12)
	p.Y.Tick.Label.Font.Size = vg.Points(12)
	p.X.Label.TextStyle.Font.Size = vg.Points(13)
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = gridColor, gridColor
	p.Add(grid)
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	legend.TextStyle.Font.Size = vg.Points(12)
	legend.Padding = vg.Points(4)
	return panel{plot: p, legend: legend, weight: weight}
}

// throughputPanel draws the writes acknowledged and failed per second;
// it returns the highest count, which the fault labels' headroom goes
// above.
func throughputPanel(seconds []Second) (panel, float64) {
	p := newPanel("writes acknowledged and failed, per second", 0.4)
	acknowledged, failed := make(plotter.XYs, len(seconds)), make(plotter.XYs, len(seconds))
	var totalAcknowledged, totalFailed int64
	highest := 1.0
	for i, s := range seconds {
		// At the middle of the second it counts, so that a fault from
		// 30.0 to 31.0 covers second 30's point.
		acknowledged[i] = plotter.XY{X: float64(i) + 0.5, Y: float64(s.Acknowledged)}
		failed[i] = plotter.XY{X: float64(i) + 0.5, Y: float64(s.Failed)}
		totalAcknowledged += s.Acknowledged
		totalFailed += s.Failed
		highest = max(highest, float64(s.Acknowledged), float64(s.Failed))
	}
	addLine(&p, acknowledged, acknowledgedColor, fmt.Sprintf("acknowledged (%d)", totalAcknowledged))
	addLine(&p, failed, failedColor, fmt.Sprintf("failed (%d)", totalFailed))
	// Set before the panels are first stacked: gonum's DataCanvas widens
	// an axis whose Min and Max are equal to Min-1..Max+1, for good.
	p.plot.Y.Min, p.plot.Y.Max = 0, highest*1.05
	p.plot.Y.Tick.Marker = countTicks{}
	return p, p.plot.Y.Max
}

// latencyPanel draws the acknowledgement latency's p50, p99 and maximum
// per second. A second without acknowledgements has no latency: its
// points are left out, and the lines broken there, rather than drawn at
// zero, which a log axis cannot show and which would read as fast.
func latencyPanel(seconds []Second) panel {
	// No y-axis label: gonum centres it by the axis's arithmetic middle,
	// which on a log axis pushes it off the panel. The title says it.
	p := newPanel("acknowledgement latency, ms (log scale; seconds without acknowledgements left out)", 0.3)
	lines := []struct {
		name  string
		value func(Second) float64
		color color.NRGBA
	}{
		{"p50", func(s Second) float64 { return s.P50Ms }, acknowledgedColor},
		{"p99", func(s Second) float64 { return s.P99Ms }, failedColor},
		{"max", func(s Second) float64 { return s.MaxMs }, maxColor},
	}
	lowest, highest := math.Inf(1), 0.0
	for _, l := range lines {
		xys := make(plotter.XYs, len(seconds))
		for i, s := range seconds {
			y := math.NaN()
			if s.Acknowledged > 0 {
				// A log axis has no 0: the resolution, 1 µs, stands in
				// for anything below it.
				y = max(l.value(s), 1/microsPerMs)
				lowest, highest = min(lowest, y), max(highest, y)
			}
			xys[i] = plotter.XY{X: float64(i) + 0.5, Y: y}
		}
		name := l.name
		if l.name == "max" && highest > 0 {
			name = fmt.Sprintf("max (highest %s ms)", formatMs(highest))
		}
		addLine(&p, xys, l.color, name)
	}
	p.plot.Y.Scale = plot.LogScale{}
	p.plot.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	// Whole decades, which LogTicks labels.
	p.plot.Y.Min = math.Pow(10, math.Floor(math.Log10(lowest)))
	p.plot.Y.Max = math.Pow(10, math.Ceil(math.Log10(highest*1.01)))
	if highest == 0 { // nothing acknowledged: an empty decade
		p.plot.Y.Min, p.plot.Y.Max = 1, 10
	}
	return p
}

// errorsPanel draws the errors per second of each series, the failed
// writes first. They are the first panel's red line again: there its
// scale is the throughput's, where a few failures a second are a flat
// line at zero; here they are on the same scale as the readers' and the
// groups' errors, where they can be compared.
func errorsPanel(seconds []Second) panel {
	p := newPanel("errors per second, by series", 0.3)
	var names []string
	for _, s := range seconds {
		for name := range s.Errors {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	highest := 0.0
	series := func(count func(Second) int64) (plotter.XYs, int64) {
		xys := make(plotter.XYs, len(seconds))
		var total int64
		for i, s := range seconds {
			n := count(s)
			xys[i] = plotter.XY{X: float64(i) + 0.5, Y: float64(n)}
			total += n
			highest = max(highest, float64(n))
		}
		return xys, total
	}
	failed, totalFailed := series(func(s Second) int64 { return s.Failed })
	addLine(&p, failed, failedColor, fmt.Sprintf("failed writes (%d)", totalFailed))
	for i, name := range names {
		xys, total := series(func(s Second) int64 { return s.Errors[name] })
		line := addLine(&p, xys, seriesColors[i%len(seriesColors)], fmt.Sprintf("%s (%d)", name, total))
		if i >= len(seriesColors) { // the colours came round again
			line.style.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
	}
	p.plot.Y.Min = 0
	// At least 0 to 4, so that one error is not drawn as the panel's
	// full height with ticks at 0.2 (gonum ticks 0 to 5 at 2.5).
	p.plot.Y.Max = max(4, math.Ceil(highest*1.1))
	p.plot.Y.Tick.Marker = countTicks{}
	return p
}

// addLine adds a line and its legend entry to p.
func addLine(p *panel, xys plotter.XYs, c color.Color, name string) *gappedLine {
	line := &gappedLine{xys: xys, style: draw.LineStyle{Color: c, Width: vg.Points(1.75)}}
	p.plot.Add(line)
	p.legend.Add(name, line)
	return line
}

// formatMs prints a latency with three significant digits, no exponent.
func formatMs(ms float64) string {
	digits := max(0, 2-int(math.Floor(math.Log10(ms))))
	return fmt.Sprintf("%.*f", digits, ms)
}

// countTicks are gonum's default ticks labelled as the counts they are:
// "250", where gonum writes "250.00".
type countTicks struct{}

func (countTicks) Ticks(min, max float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(min, max)
	for i := range ticks {
		if ticks[i].Label != "" {
			// Rounded, so that a tick computed as 0.1*3 reads 0.3; 'f',
			// so that a million records a second reads 1000000, not 1e+06.
			ticks[i].Label = strconv.FormatFloat(math.Round(ticks[i].Value*1e6)/1e6, 'f', -1, 64)
		}
	}
	return ticks
}

// secondTicks label the x axis every 1, 2, 5, 10, 15 or 30 seconds, 1,
// 2, 5, 10, 15 or 30 minutes, or so many hours: the shortest step with
// at most twenty labels, where gonum's default labels only 0, 50 and 100
// of a two-minute run, too few to read a fault's time from. Unlabelled
// ticks halve the steps.
type secondTicks struct{}

func (secondTicks) Ticks(min, max float64) []plot.Tick {
	step := 3600.0
	for _, s := range []float64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800} {
		if (max-min)/s <= 20 {
			step = s
			break
		}
	}
	for (max-min)/step > 20 {
		step *= 2
	}
	var ticks []plot.Tick
	for v := math.Ceil(min/step) * step; v <= max; v += step {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
		if half := v + step/2; step >= 2 && half <= max {
			ticks = append(ticks, plot.Tick{Value: half})
		}
	}
	return ticks
}

// stack returns a canvas for each panel, one above the other in area
// with heights in proportion to their weights, each cropped so that the
// data areas share their left and right edges: a fault's span then
// stands at the same x in every panel.
func stack(panels []panel, area draw.Canvas) []draw.Canvas {
	var weights float64
	for _, p := range panels {
		weights += p.weight
	}
	height := area.Max.Y - area.Min.Y - panelGap*vg.Length(len(panels)-1)
	canvases := make([]draw.Canvas, len(panels))
	top := area.Max.Y
	var left, right vg.Length // the widest axis on each side
	for i, p := range panels {
		h := height * vg.Length(p.weight/weights)
		canvases[i] = draw.Canvas{Canvas: area.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: area.Min.X, Y: top - h},
			Max: vg.Point{X: area.Max.X, Y: top},
		}}
		top -= h + panelGap
		data := p.plot.DataCanvas(canvases[i])
		left = max(left, data.Min.X-canvases[i].Min.X)
		right = max(right, canvases[i].Max.X-data.Max.X)
	}
	for i, p := range panels {
		data := p.plot.DataCanvas(canvases[i])
		canvases[i] = draw.Crop(canvases[i],
			left-(data.Min.X-canvases[i].Min.X),
			-(right - (canvases[i].Max.X - data.Max.X)), 0, 0)
	}
	return canvases
}

// gappedLine is a line through points, broken where a point's Y is NaN;
// a point alone between gaps is drawn as a dot.
type gappedLine struct {
	xys   plotter.XYs
	style draw.LineStyle
}

func (l *gappedLine) Plot(c draw.Canvas, p *plot.Plot) {
	x, y := p.Transforms(&c)
	var run []vg.Point
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			c.DrawGlyph(draw.GlyphStyle{Color: l.style.Color, Radius: l.style.Width, Shape: draw.CircleGlyph{}}, run[0])
		default:
			c.StrokeLines(l.style, c.ClipLinesXY(run)...)
		}
		run = run[:0]
	}
	for _, xy := range l.xys {
		if math.IsNaN(xy.Y) {
			flush()
			continue
		}
		run = append(run, vg.Point{X: x(xy.X), Y: y(xy.Y)})
	}
	flush()
}

func (l *gappedLine) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(l.style, c.Min.X, y, c.Max.X, y)
}
