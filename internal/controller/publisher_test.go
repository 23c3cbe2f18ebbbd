package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fjordmq/fjord/internal/controlplane"
	"github.com/fjordmq/fjord/internal/metadata"
)

func imageAt(offset uint64) *metadata.Image {
	img := metadata.Empty(testConfigs)
	img.Offset = offset
	return img
}

type recorder struct {
	mu      sync.Mutex
	offsets []uint64
}

func (r *recorder) fn(img *metadata.Image) {
	r.mu.Lock()
	r.offsets = append(r.offsets, img.Offset)
	r.mu.Unlock()
}

func (r *recorder) get() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.offsets)
}

func TestPublisherDeliversInOrder(t *testing.T) {
	p := newPublisher(imageAt(0))
	defer p.close()
	var a, b recorder
	cancelA := p.subscribe(a.fn)
	defer cancelA()
	for i := uint64(1); i <= 50; i++ {
		p.push(imageAt(i), i)
		if i == 20 {
			// b joins mid-stream: it sees the current image first, then
			// every later one exactly once.
			p.subscribe(b.fn)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.waitPublished(ctx, 50); err != nil {
		t.Fatal(err)
	}
	want := make([]uint64, 51)
	for i := range want {
		want[i] = uint64(i)
	}
	if got := a.get(); !slices.Equal(got, want) {
		t.Fatalf("a saw %v", got)
	}
	gotB := b.get()
	if len(gotB) == 0 || gotB[len(gotB)-1] != 50 {
		t.Fatalf("b saw %v", gotB)
	}
	for i := 1; i < len(gotB); i++ {
		if gotB[i] != gotB[i-1]+1 {
			t.Fatalf("b skipped or repeated: %v", gotB)
		}
	}
	if p.published.Load().Offset != 50 {
		t.Fatalf("published offset %d", p.published.Load().Offset)
	}
}

func TestPublisherCancel(t *testing.T) {
	p := newPublisher(imageAt(0))
	defer p.close()
	var a, b recorder
	cancelA := p.subscribe(a.fn)
	p.subscribe(b.fn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p.push(imageAt(1), 1)
	if err := p.waitPublished(ctx, 1); err != nil {
		t.Fatal(err)
	}
	cancelA()
	cancelA() // twice is harmless
	p.push(imageAt(2), 2)
	if err := p.waitPublished(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got := a.get(); !slices.Equal(got, []uint64{0, 1}) {
		t.Fatalf("cancelled subscriber saw %v", got)
	}
	if got := b.get(); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Fatalf("b saw %v", got)
	}
}

// TestPublisherWaitsForSlowSubscriber: the published index (and Image)
// move only after every subscriber returned.
func TestPublisherWaitsForSlowSubscriber(t *testing.T) {
	p := newPublisher(imageAt(0))
	defer p.close()
	entered := make(chan struct{})
	release := make(chan struct{})
	p.subscribe(func(img *metadata.Image) {
		if img.Offset == 1 {
			close(entered)
			<-release
		}
	})
	p.push(imageAt(1), 1)
	<-entered
	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.waitPublished(short, 1); !errors.Is(err, controlplane.ErrTimedOut) {
		t.Fatalf("waitPublished while a subscriber holds the image: %v", err)
	}
	if p.published.Load().Offset != 0 {
		t.Fatal("image published before its subscriber returned")
	}
	close(release)
	ctx, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	if err := p.waitPublished(ctx, 1); err != nil {
		t.Fatal(err)
	}
}

func TestPublisherClose(t *testing.T) {
	p := newPublisher(imageAt(0))
	var a recorder
	p.subscribe(a.fn)
	p.push(imageAt(1), 1)
	p.push(imageAt(2), 2)
	p.close()
	// Close delivers what was queued.
	if got := a.get(); !slices.Equal(got, []uint64{0, 1, 2}) {
		t.Fatalf("saw %v", got)
	}
	ctx := context.Background()
	if err := p.waitPublished(ctx, 2); err != nil {
		t.Fatalf("index reached before close: %v", err)
	}
	if err := p.waitPublished(ctx, 3); !errors.Is(err, controlplane.ErrNotController) {
		t.Fatalf("waiting past close: %v", err)
	}
}
