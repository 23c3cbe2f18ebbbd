package timeline

import (
	"cmp"
	"image/color"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// How the faults are drawn: a shaded span across every panel, coloured
// by the fault's family, and at the top of the first panel its label
// over a bar from its start to its end, in lanes so that labels of
// faults close in time do not overlap.

const (
	// minSpanWidth is the narrowest a fault's span is drawn: a fault of
	// no duration (End == Start) still shows.
	minSpanWidth = 2 * vg.Millimeter

	// A lane of fault labels: the label's text, then under it the bar
	// from the fault's start to its end (a vg.Length counts points).
	laneBarWidth vg.Length = 3.5
	laneSpacing  vg.Length = 3
	bandPadding  vg.Length = 4
	// labelGap is the least space between two labels in a lane. It also
	// absorbs the few points the panel's data area may narrow between
	// placing the labels and drawing them (a wider y tick label).
	labelGap = 3 * vg.Millimeter
	// maxBandShare is how much of the first panel's height the labels
	// may take; the labels that fit in no lane within it are counted in
	// the panel's title instead.
	maxBandShare = 0.45
)

// family is a group of fault kinds that share a colour.
type family int

const (
	processFaults family = iota
	networkFaults
	diskFaults
	otherFaults
	familyCount
)

var familyNames = [familyCount]string{"process fault", "network fault", "disk fault", "other fault"}

// familyColors are opaque, for the bars under the labels; a span is the
// same colour at spanAlpha, light enough that the lines show through it
// and that where faults of two families overlap their tints mix.
var familyColors = [familyCount]color.NRGBA{
	{R: 255, G: 127, B: 14, A: 255},  // orange
	{R: 148, G: 103, B: 189, A: 255}, // purple
	{R: 44, G: 160, B: 44, A: 255},   // green
	{R: 127, G: 127, B: 127, A: 255}, // grey
}

const spanAlpha = 56

func familyOf(kind string) family {
	switch strings.ToLower(kind) {
	case "kill", "pause", "restart", "kill-all":
		return processFaults
	case "isolate", "split", "bridge", "cut", "delay":
		return networkFaults
	case "torn-write", "bit-flip":
		return diskFaults
	}
	return otherFaults
}

func spanColor(f family) color.NRGBA {
	c := familyColors[f]
	c.A = spanAlpha
	return c
}

// startColor is the line at a span's start: the family's colour, light
// enough not to read as data.
func startColor(f family) color.NRGBA {
	c := familyColors[f]
	c.A = 140
	return c
}

func label(f Fault) string {
	if f.Label != "" {
		return f.Label
	}
	return f.Kind
}

// addFamilies adds to legend a swatch for each fault family among
// faults.
func addFamilies(legend *plot.Legend, faults []Fault) {
	var present [familyCount]bool
	for _, f := range faults {
		present[familyOf(f.Kind)] = true
	}
	for f := range familyCount {
		if present[f] {
			legend.Add(familyNames[f], swatch{fill: spanColor(f), bar: familyColors[f]})
		}
	}
}

// swatch is a fault family's legend entry: its span's tint, with the
// bar its labels have.
type swatch struct {
	fill, bar color.Color
}

func (s swatch) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(s.fill, []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}})
	c.StrokeLine2(draw.LineStyle{Color: s.bar, Width: laneBarWidth}, c.Min.X, c.Min.Y+laneBarWidth/2, c.Max.X, c.Min.Y+laneBarWidth/2)
}

// faultSpans shades the faults' spans over the whole height of a panel,
// and marks where each began.
//
// The spans of one family are shaded as their union: shading each alone,
// overlapping faults of a family (six delays at once) stacked their tint
// to an opaque block that hid the lines. Where one fault's span ends and
// another's of the same family begins is still told by the thin line at
// each start and by the bars under the labels; overlapping families
// still mix their tints.
type faultSpans struct {
	faults []Fault
}

func (s faultSpans) Plot(c draw.Canvas, p *plot.Plot) {
	x, _ := p.Transforms(&c)
	var spans [familyCount][]extent
	for _, f := range s.faults {
		left, right := spanEdges(x, f, c.Max.X)
		left, right = max(left, c.Min.X), min(right, c.Max.X)
		if right <= left {
			continue
		}
		family := familyOf(f.Kind)
		spans[family] = append(spans[family], extent{left: float64(left), right: float64(right)})
	}
	for f, extents := range spans {
		for _, u := range union(extents) {
			left, right := vg.Length(u.left), vg.Length(u.right)
			c.FillPolygon(spanColor(family(f)), []vg.Point{
				{X: left, Y: c.Min.Y}, {X: right, Y: c.Min.Y}, {X: right, Y: c.Max.Y}, {X: left, Y: c.Max.Y},
			})
		}
		edge := draw.LineStyle{Color: startColor(family(f)), Width: vg.Points(0.75)}
		for _, e := range extents {
			c.StrokeLine2(edge, vg.Length(e.left), c.Min.Y, vg.Length(e.left), c.Max.Y)
		}
	}
}

// union returns the union of extents as disjoint extents, left to right.
func union(extents []extent) []extent {
	sorted := slices.Clone(extents)
	slices.SortFunc(sorted, func(a, b extent) int { return cmp.Compare(a.left, b.left) })
	var merged []extent
	for _, e := range sorted {
		if n := len(merged); n > 0 && e.left <= merged[n-1].right {
			merged[n-1].right = max(merged[n-1].right, e.right)
			continue
		}
		merged = append(merged, e)
	}
	return merged
}

// spanEdges returns where f's span is drawn: from its start to its end,
// at least minSpanWidth wide, and within the data area's right edge.
func spanEdges(x func(float64) vg.Length, f Fault, rightEdge vg.Length) (left, right vg.Length) {
	left, right = x(f.Start), max(x(f.End), x(f.Start)+minSpanWidth)
	if right > rightEdge { // a fault of no duration at the very end
		left, right = min(left, rightEdge-minSpanWidth), rightEdge
	}
	return left, right
}

// faultLabels writes the faults' labels at the top of the first panel,
// each in its lane with a bar from the fault's start to its end.
type faultLabels struct {
	faults []Fault
	// lanes[i] is faults[i]'s lane, 0 the top; -1 for none.
	lanes []int
	// bandShare is the share of the panel's height the lanes take;
	// unlabelled, how many faults got no lane.
	bandShare  float64
	unlabelled int
}

var labelStyle = textStyle(11)

func laneHeight() vg.Length {
	return labelStyle.Height("Ag") + laneBarWidth + laneSpacing
}

// labelExtent returns where f's label and bar stand across the data
// area from leftEdge to rightEdge: the text from textLeft, and the whole
// from textLeft to right. The label starts at the fault's start, unless
// it would run off the right edge: then it ends there.
func labelExtent(x func(float64) vg.Length, f Fault, leftEdge, rightEdge vg.Length) (textLeft, right vg.Length) {
	barLeft, barRight := spanEdges(x, f, rightEdge)
	width := labelStyle.Width(label(f))
	textLeft = max(min(barLeft, rightEdge-width), leftEdge)
	return textLeft, max(barRight, textLeft+width)
}

// placeLabels gives each fault a lane at the top of p's data area
// within canvas, and says how much of the height the lanes take.
func placeLabels(faults []Fault, p *plot.Plot, canvas draw.Canvas) *faultLabels {
	data := p.DataCanvas(canvas)
	x, _ := p.Transforms(&data)
	extents := make([]extent, len(faults))
	for i, f := range faults {
		left, right := labelExtent(x, f, data.Min.X, data.Max.X)
		extents[i] = extent{left: float64(left), right: float64(right)}
	}
	height := data.Max.Y - data.Min.Y
	maxLanes := max(1, int((vg.Length(maxBandShare)*height-bandPadding)/laneHeight()))
	lanes, used := assignLanes(extents, float64(labelGap), maxLanes)
	labels := &faultLabels{faults: faults, lanes: lanes}
	for _, lane := range lanes {
		if lane < 0 {
			labels.unlabelled++
		}
	}
	if used > 0 {
		labels.bandShare = float64((bandPadding + vg.Length(used)*laneHeight()) / height)
	}
	return labels
}

func (l *faultLabels) Plot(c draw.Canvas, p *plot.Plot) {
	x, _ := p.Transforms(&c)
	for i, f := range l.faults {
		if l.lanes[i] < 0 {
			continue
		}
		top := c.Max.Y - bandPadding - vg.Length(l.lanes[i])*laneHeight()
		textLeft, _ := labelExtent(x, f, c.Min.X, c.Max.X)
		c.FillText(labelStyle, vg.Point{X: textLeft, Y: top}, label(f))
		barY := top - labelStyle.Height("Ag") - laneBarWidth/2
		barLeft, barRight := spanEdges(x, f, c.Max.X)
		c.StrokeLine2(draw.LineStyle{Color: familyColors[familyOf(f.Kind)], Width: laneBarWidth}, barLeft, barY, barRight, barY)
	}
}

// extent is a stretch across a panel, in points: the room a label and
// its bar take, or a span.
type extent struct {
	left, right float64
}

// assignLanes gives each extent a lane, 0 the first: the first lane
// whose last extent ends at least gap before this one begins, taking the
// extents by their left edge. This is first-fit interval partitioning,
// which uses no more lanes than the most extents overlapping at one
// point (with gap added): as few as any assignment could. An extent that
// fits in none of maxLanes gets -1. It returns the lanes, in the order of
// extents, and how many were used.
func assignLanes(extents []extent, gap float64, maxLanes int) (lanes []int, used int) {
	order := make([]int, len(extents))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(extents[a].left, extents[b].left)
	})
	lanes = make([]int, len(extents))
	var laneEnds []float64 // laneEnds[k] is where lane k's last extent ends
	for _, i := range order {
		lanes[i] = -1
		for k := range laneEnds {
			if laneEnds[k]+gap <= extents[i].left {
				lanes[i], laneEnds[k] = k, extents[i].right
				break
			}
		}
		if lanes[i] < 0 && len(laneEnds) < maxLanes {
			lanes[i] = len(laneEnds)
			laneEnds = append(laneEnds, extents[i].right)
		}
	}
	return lanes, len(laneEnds)
}
