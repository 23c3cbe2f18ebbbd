package bufpool

import "testing"

func TestClasses(t *testing.T) {
	cases := []struct{ n, size int }{
		{0, 4096}, {1, 4096}, {4096, 4096}, {4097, 8192}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20},
		{16 << 20, 16 << 20}, {16<<20 + 1, 16<<20 + 1},
	}
	for _, c := range cases {
		if got := ClassBytes(c.n); got != c.size {
			t.Errorf("ClassBytes(%d) = %d, want %d", c.n, got, c.size)
		}
		b := Get(c.n)
		if len(b) != c.size || cap(b) != c.size {
			t.Errorf("Get(%d): len %d cap %d, want %d", c.n, len(b), cap(b), c.size)
		}
		Put(b)
	}
}

// A buffer that is not a class size is not pooled: it would come back as
// a class it is smaller than.
func TestPutForeignBuffer(t *testing.T) {
	Put(make([]byte, 5000))
	if b := Get(5000); cap(b) != 8<<10 {
		t.Fatalf("Get(5000) after putting a 5000-byte buffer: cap %d, want 8192", cap(b))
	}
}
