package limits

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// WriteJSON writes r as indented JSON to path, creating its directory;
// the file appears whole or not at all (written aside, then renamed).
func (r *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// ReadJSON reads a Result written by WriteJSON.
func ReadJSON(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("limits result %s: %w", path, err)
	}
	return &r, nil
}

// WriteTable prints the machine, then one row per measurement with its
// median and every run, in MB/s.
func (r *Result) WriteTable(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "machine: %d cores", m.Cores)
	if m.CPUModel != "" {
		fmt.Fprintf(w, " (%s)", m.CPUModel)
	}
	if m.MemoryBytes > 0 {
		fmt.Fprintf(w, ", %s memory", FormatSize(m.MemoryBytes))
	}
	fmt.Fprintf(w, ", %s %s, %s\n", m.Kernel, m.Arch, m.GoVersion)
	fmt.Fprintf(w, "disk:    %s", m.Disk.Dir)
	if m.Disk.FSType != "" {
		fmt.Fprintf(w, " on %s (%s, mounted at %s)", m.Disk.Device, m.Disk.FSType, m.Disk.MountPoint)
	}
	fmt.Fprintf(w, "\nstarted: %s, %d run(s) each, MB/s = 10^6 bytes/s\n\n", r.Start.Format(time.RFC3339), r.Config.Runs)

	// Descriptions left-aligned, figures right-aligned: tabwriter
	// aligns every column the same way, so the widths are computed here.
	rows := [][4]string{{"measurement", "size/run", "median MB/s", "runs (MB/s)"}}
	for _, ms := range r.Measurements {
		var size int64
		runs := make([]string, len(ms.Runs))
		for i, s := range ms.Runs {
			runs[i] = strconv.FormatFloat(math.Round(s.MBps), 'f', 0, 64)
			size = s.Bytes
		}
		rows = append(rows, [4]string{ms.Description, FormatSize(size), strconv.FormatFloat(math.Round(ms.MedianMBps), 'f', 0, 64), strings.Join(runs, ", ")})
	}
	var width [3]int
	for _, row := range rows {
		for i := range width {
			width[i] = max(width[i], len(row[i]))
		}
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%-*s  %*s  %*s  %s\n", width[0], row[0], width[1], row[1], width[2], row[2], row[3])
	}
}

// FormatSize prints a byte count in the largest binary unit that
// divides it, or with one decimal when none does: 1 GiB, 1.5 MiB, 1000 B.
func FormatSize(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size {
			if n%u.size == 0 {
				return fmt.Sprintf("%d %s", n/u.size, u.name)
			}
			return fmt.Sprintf("%.1f %s", float64(n)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d B", n)
}

// ParseSize reads a positive byte count: a number of bytes ("1048576")
// or a number with a unit, binary (KiB, MiB, GiB, TiB) or decimal (KB,
// MB, GB, TB), case-insensitive, with or without a space ("1GiB",
// "512 MiB", "1.5GB"). Zero and negative sizes are errors.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') && t[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(t[:i]), strings.ToLower(strings.TrimSpace(t[i:]))
	mult := map[string]float64{
		"": 1, "b": 1,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	}[unit]
	if strings.HasPrefix(num, "-") {
		return 0, fmt.Errorf("size %q: must be positive", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || strings.ContainsAny(num, "eE+-") {
		return 0, fmt.Errorf("size %q: want a number of bytes or a number with a unit (KiB, MiB, GiB, KB, MB, GB), e.g. 1GiB", s)
	}
	bytes := v * mult
	if bytes < 1 || bytes > math.MaxInt64/2 || bytes != math.Trunc(bytes) {
		return 0, fmt.Errorf("size %q: want a whole, positive number of bytes", s)
	}
	return int64(bytes), nil
}
