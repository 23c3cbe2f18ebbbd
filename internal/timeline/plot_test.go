package timeline

import (
	"flag"
	"image"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var examplePNG = flag.String("example-png", "", "write TestWritePNGRealisticRun's PNG to this path, to look at")

// decodePNG reads path as a PNG and checks its size is the bench's.
func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	if got, want := img.Bounds().Size(), (image.Point{X: 1200, Y: 1000}); got != want {
		t.Fatalf("PNG is %v pixels, want %v (12 x 10 inches at 100 DPI)", got, want)
	}
	return img
}

// steadyRun records 100 seconds of 50 acknowledgements a second with a
// few failures and reader errors.
func steadyRun(start time.Time) *Timeline {
	tl := New(start)
	for s := range 100 {
		for j := range 50 {
			sent := start.Add(time.Duration(s)*time.Second + time.Duration(j)*20*time.Millisecond)
			tl.Ack(sent, sent.Add(time.Duration(1+j%7)*time.Millisecond))
		}
		if s%10 == 0 {
			at := start.Add(time.Duration(s)*time.Second + time.Second/2)
			tl.Failure(at)
			tl.Error("reader", at)
		}
	}
	return tl
}

func TestWritePNGDrawsFaultSpansAcrossEveryPanel(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	dir := t.TempDir()
	without, with := filepath.Join(dir, "without.png"), filepath.Join(dir, "with.png")
	if err := steadyRun(start).WritePNG(without, "steady"); err != nil {
		t.Fatal(err)
	}
	tl := steadyRun(start)
	tl.Fault(Fault{Kind: "kill", Label: "kill 2", Start: 40, End: 60})
	if err := tl.WritePNG(with, "steady"); err != nil {
		t.Fatal(err)
	}
	a, b := decodePNG(t, without), decodePNG(t, with)

	// A span covers the three panels' height: the columns it crosses
	// differ in a good part of their rows. A label or a legend entry
	// changes only a few rows of a column.
	bounds := a.Bounds()
	spanColumns := 0
	for x := bounds.Min.X; x < bounds.Max.X; x++ {
		differing := 0
		for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
			if a.At(x, y) != b.At(x, y) {
				differing++
			}
		}
		if differing > bounds.Dy()/2 {
			spanColumns++
		}
	}
	// 20 of 100 seconds of a data area about 880 pixels wide.
	if spanColumns < 150 || spanColumns > 200 {
		t.Errorf("%d columns differ in more than half their rows; want the span's 150-200", spanColumns)
	}
}

func TestWritePNGEmptyTimeline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty.png")
	if err := New(time.Now()).WritePNG(path, "an empty run"); err != nil {
		t.Fatal(err)
	}
	img := decodePNG(t, path)
	// Something was written on it (the title and the message).
	dark := 0
	for y := range img.Bounds().Dy() {
		for x := range img.Bounds().Dx() {
			if r, _, _, _ := img.At(x, y).RGBA(); r < 0x8000 {
				dark++
			}
		}
	}
	if dark < 500 {
		t.Errorf("%d dark pixels: the empty PNG says nothing", dark)
	}
}

func TestWritePNGMissingDirectoryLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "missing", "timeline.png")
	if err := steadyRun(time.Now()).WritePNG(path, "x"); err == nil {
		t.Fatal("WritePNG into a missing directory succeeded")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("left %v behind", entries)
	}
}

func TestWritePNGFailedRenameLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	// A non-empty directory where the PNG should go: the rename fails
	// after the PNG was written to the temporary file.
	path := filepath.Join(dir, "timeline.png")
	if err := os.MkdirAll(filepath.Join(path, "occupied"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := steadyRun(time.Now()).WritePNG(path, "x"); err == nil {
		t.Fatal("WritePNG over a non-empty directory succeeded")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "timeline.png" {
			t.Errorf("left %s behind", e.Name())
		}
	}
}

func TestWritePNGReplacesAndIsReadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "timeline.png")
	if err := os.WriteFile(path, []byte("an older report"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := steadyRun(time.Now()).WritePNG(path, "x"); err != nil {
		t.Fatal(err)
	}
	decodePNG(t, path)
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o644 {
		t.Errorf("mode %v, want 0644 (CreateTemp's 0600 kept)", perm)
	}
}

// Faults with End < Start, beyond the data, of no duration, or starting
// before the start are clamped (Fault's doc) and drawn.
func TestWritePNGOddFaults(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	tl := steadyRun(start)
	tl.Fault(Fault{Kind: "pause", Label: "ends before it starts", Start: 30, End: 20})
	tl.Fault(Fault{Kind: "split", Label: "beyond the data", Start: 90, End: 130.5})
	tl.Fault(Fault{Kind: "bit-flip", Label: "before the start", Start: -5, End: 3})
	tl.Fault(Fault{Kind: "mystery", Start: 130.5, End: 130.5})
	tl.Fault(Fault{Kind: "cut", Label: "NaN", Start: math.NaN(), End: math.NaN()})
	path := filepath.Join(t.TempDir(), "odd.png")
	if err := tl.WritePNG(path, "odd faults"); err != nil {
		t.Fatal(err)
	}
	decodePNG(t, path)
	if n := len(tl.Seconds()); n != 131 {
		t.Errorf("%d seconds, want 131: up to the fault ending at 130.5", n)
	}
}

// Many faults in little time: the labels that fit in no lane are
// counted, the rest placed, and the PNG still renders.
func TestWritePNGCrowdedFaults(t *testing.T) {
	tl := steadyRun(time.Unix(1_700_000_000, 0))
	for i := range 200 {
		s := float64(i) / 2
		tl.Fault(Fault{Kind: "delay", Label: "delay 200ms on every link", Start: s, End: s + 3})
	}
	path := filepath.Join(t.TempDir(), "crowded.png")
	if err := tl.WritePNG(path, "crowded"); err != nil {
		t.Fatal(err)
	}
	decodePNG(t, path)
}

// The panels' data areas share their left and right edges, so a span
// stands at the same x in each; the first panel's counts start at 0 and
// stay below the band of fault labels. Regression: the axis's range was
// set after the first stacking, where gonum had already widened its
// empty range to -1..1 for good.
func TestLayoutAlignsPanelsAndKeepsLabelsAboveData(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	withData := steadyRun(start)
	onlyFaults := New(start)
	for _, tl := range []*Timeline{withData, onlyFaults} {
		for i := range 12 {
			s := float64(i * 8)
			tl.Fault(Fault{Kind: "split", Label: "split [1] | [2 3]", Start: s, End: s + 6})
		}
	}
	for name, tl := range map[string]*Timeline{"with data": withData, "only faults": onlyFaults} {
		t.Run(name, func(t *testing.T) {
			seconds, faults := tl.snapshot()
			img := vgimg.NewWith(vgimg.UseWH(pngWidth, pngHeight), vgimg.UseDPI(pngDPI))
			area := draw.Crop(draw.New(img), 0, -legendWidth, 0, 0)
			panels, canvases, labels := layoutPanels(area, seconds, faults)
			first := panels[0].plot.DataCanvas(canvases[0])
			for i := range panels {
				data := panels[i].plot.DataCanvas(canvases[i])
				if math.Abs(float64(data.Min.X-first.Min.X)) > 0.01 || math.Abs(float64(data.Max.X-first.Max.X)) > 0.01 {
					t.Errorf("panel %d's data area spans x %v to %v, panel 0's %v to %v", i, data.Min.X, data.Max.X, first.Min.X, first.Max.X)
				}
			}
			top := panels[0].plot
			if top.Y.Min != 0 {
				t.Errorf("the counts' axis starts at %v, want 0", top.Y.Min)
			}
			used := 0
			for _, lane := range labels.lanes {
				used = max(used, lane+1)
			}
			if used < 2 || labels.unlabelled != 0 {
				t.Fatalf("%d lanes, %d unlabelled: the test wants overlapping labels, all placed", used, labels.unlabelled)
			}
			_, y := top.Transforms(&first)
			highest := 1.0
			for _, s := range seconds {
				highest = max(highest, float64(s.Acknowledged))
			}
			bandBottom := first.Max.Y - bandPadding - vg.Length(used)*laneHeight()
			if y(highest) > bandBottom {
				t.Errorf("the highest count is drawn at y %v, above the labels' bottom %v", y(highest), bandBottom)
			}
		})
	}
}

// TestWritePNGRealisticRun renders what `fjord verify` would: 120 s at
// about 400 records a second, a dozen faults of every family, a latency
// spike and failures during a kill, no acknowledgements while every
// node is down, reader errors during network faults. Run with
// -example-png=/tmp/timeline-example.png to look at it.
func TestWritePNGRealisticRun(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	tl := New(start)
	faults := []Fault{
		{Kind: "kill", Label: "kill 2", Start: 8, End: 14},
		{Kind: "pause", Label: "pause 3", Start: 18, End: 26},
		{Kind: "split", Label: "split [1] | [2 3]", Start: 22, End: 30},
		{Kind: "restart", Label: "restart 1", Start: 34, End: 35},
		{Kind: "delay", Label: "delay 200ms 1<->2", Start: 40, End: 48},
		{Kind: "isolate", Label: "isolate 3", Start: 46, End: 52},
		{Kind: "torn-write", Label: "torn-write 2", Start: 56, End: 60},
		{Kind: "bridge", Label: "bridge [1] 2 [3]", Start: 63, End: 70},
		{Kind: "bit-flip", Label: "bit-flip 1", Start: 72, End: 73},
		{Kind: "kill-all", Label: "kill-all", Start: 78, End: 86},
		{Kind: "cut", Label: "cut 1->3", Start: 92, End: 99},
		{Kind: "pause", Label: "pause 1", Start: 104, End: 110},
		{Kind: "kill", Label: "kill 3", Start: 106, End: 112},
	}
	during := func(s float64, kinds ...string) bool {
		for _, f := range faults {
			for _, k := range kinds {
				if f.Kind == k && f.Start <= s && s < f.End {
					return true
				}
			}
		}
		return false
	}
	random := rand.New(rand.NewPCG(1, 2))
	at := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	for s := range 120 {
		rate, spike, failures := 400, 0.0, 0
		switch {
		case during(float64(s), "kill-all"):
			rate, failures = 0, 40
		case float64(s) >= 8 && s < 10: // the kill, until the leader moves
			rate, spike, failures = 60, 3, 25
		case during(float64(s), "kill", "pause"):
			rate, spike, failures = 300, 0.4, 2
		case during(float64(s), "delay"):
			rate, spike = 350, 0.2
		case during(float64(s), "split", "isolate", "cut", "bridge"):
			rate, spike, failures = 330, 0.6, 3
		}
		if rate > 0 {
			rate += random.IntN(40) - 20
		}
		for j := range rate {
			sent := at(float64(s) + random.Float64())
			latency := 2*time.Millisecond + time.Duration(random.ExpFloat64()*float64(time.Millisecond))
			if random.Float64() < 0.01 {
				latency *= 8
			}
			if spike > 0 && j%10 == 0 {
				latency += time.Duration(spike * random.Float64() * float64(time.Second))
			}
			tl.Ack(sent, sent.Add(latency))
		}
		for range failures {
			tl.Failure(at(float64(s) + random.Float64()))
		}
		if during(float64(s), "split", "isolate", "cut", "kill-all") {
			for range 1 + random.IntN(5) {
				tl.Error("reader", at(float64(s)+random.Float64()))
			}
		}
		if during(float64(s), "kill-all") && s%2 == 0 {
			tl.Error("group", at(float64(s)+0.5))
		}
	}
	for _, f := range faults {
		tl.Fault(f)
	}
	path := *examplePNG
	if path == "" {
		path = filepath.Join(t.TempDir(), "example.png")
	}
	if err := tl.WritePNG(path, "verify: 120 s at 400 records/s on 3 nodes, 13 faults (an example)"); err != nil {
		t.Fatal(err)
	}
	decodePNG(t, path)
}
