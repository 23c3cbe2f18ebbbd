package limits

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where the figures were measured, so that a figure is
// never quoted without the machine it belongs to. Fields that cannot be
// read on this system are left empty.
type Machine struct {
	Cores       int    `json:"cores"`
	CPUModel    string `json:"cpu_model,omitempty"`
	MemoryBytes int64  `json:"memory_bytes,omitempty"`
	// Kernel is the OS and its release, e.g. "linux 6.18.44".
	Kernel    string `json:"kernel"`
	Arch      string `json:"arch"`
	GoVersion string `json:"go_version"`
	Disk      Disk   `json:"disk"`
}

// Disk is the file system that held the disk measurements' files.
type Disk struct {
	Dir        string `json:"dir"`         // absolute
	MountPoint string `json:"mount_point"` // of the file system holding Dir
	Device     string `json:"device"`      // mount source, e.g. /dev/vda
	FSType     string `json:"fs_type"`     // e.g. ext4
}

// DescribeMachine reads the machine's description from the runtime and
// /proc, and the file system holding dir from /proc/self/mountinfo.
func DescribeMachine(dir string) Machine {
	m := Machine{
		Cores:     runtime.NumCPU(),
		Kernel:    runtime.GOOS,
		Arch:      runtime.GOARCH,
		GoVersion: runtime.Version(),
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel += " " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPUModel = procField(b, "model name")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		// "MemTotal:       24684544 kB"
		if f := strings.Fields(procField(b, "MemTotal")); len(f) == 2 && f[1] == "kB" {
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				m.MemoryBytes = kb * 1024
			}
		}
	}
	m.Disk.Dir = dir
	if abs, err := filepath.Abs(dir); err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			abs = real
		}
		m.Disk.Dir = abs
		if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
			m.Disk.MountPoint, m.Disk.Device, m.Disk.FSType = mountOf(b, abs)
		}
	}
	return m
}

// procField returns the value of the first "key: value" line in a /proc
// file such as cpuinfo or meminfo.
func procField(data []byte, key string) string {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// mountOf finds, in the text of /proc/self/mountinfo, the mount that
// holds the absolute path dir: the one with the longest mount point that
// is dir or an ancestor of it (the last such line wins, as a later mount
// hides an earlier one at the same point). A line reads (proc(5)):
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// field 5 is the mount point, and after the "-" come the type and the
// source. Spaces in paths are escaped as \040.
func mountOf(mountinfo []byte, dir string) (mountPoint, device, fsType string) {
	best := -1
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(f); i++ {
			if f[i] == "-" {
				sep = i
				break
			}
		}
		if len(f) < 5 || sep < 0 || sep+2 >= len(f) {
			continue
		}
		mp := unescapeMount(f[4])
		if !within(dir, mp) || len(mp) < best {
			continue
		}
		best = len(mp)
		mountPoint, fsType, device = mp, f[sep+1], unescapeMount(f[sep+2])
	}
	return mountPoint, device, fsType
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, \011
// tab, \012 newline, \134 backslash).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
