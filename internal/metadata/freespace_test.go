package metadata

import (
	"errors"
	"strings"
	"testing"
)

func TestParseFreeSpace(t *testing.T) {
	good := []struct {
		in   string
		want FreeSpace
		of   int64 // Of(1000 GiB)
	}{
		{"0", FreeSpace{}, 0},
		{"0%", FreeSpace{Percent: true}, 0},
		{"10%", FreeSpace{Percent: true, Share: 10}, 100 << 30},
		{" 2.5 % ", FreeSpace{Percent: true, Share: 2.5}, 25 << 30},
		{"99.9%", FreeSpace{Percent: true, Share: 99.9}, 999 << 30},
		{"536870912", FreeSpace{Bytes: 512 << 20}, 512 << 20},
		{"512MiB", FreeSpace{Bytes: 512 << 20}, 512 << 20},
		{"2 GiB", FreeSpace{Bytes: 2 << 30}, 2 << 30},
		{"1TiB", FreeSpace{Bytes: 1 << 40}, 1 << 40},
		{"64KiB", FreeSpace{Bytes: 64 << 10}, 64 << 10},
		{"5GB", FreeSpace{Bytes: 5e9}, 5e9},
		{"7MB", FreeSpace{Bytes: 7e6}, 7e6},
		{"3KB", FreeSpace{Bytes: 3000}, 3000},
		{"1TB", FreeSpace{Bytes: 1e12}, 1e12},
		{"100B", FreeSpace{Bytes: 100}, 100},
		{"1048576TiB", FreeSpace{Bytes: 1 << 60}, 1 << 60},
	}
	for _, c := range good {
		got, err := ParseFreeSpace(c.in)
		if err != nil {
			t.Errorf("ParseFreeSpace(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseFreeSpace(%q) = %+v, want %+v", c.in, got, c.want)
		}
		if of := got.Of(1000 << 30); of != c.of {
			t.Errorf("ParseFreeSpace(%q).Of(1000 GiB) = %d, want %d", c.in, of, c.of)
		}
		// String reads back as the same threshold.
		if again, err := ParseFreeSpace(got.String()); err != nil || again != got {
			t.Errorf("ParseFreeSpace(%q).String() = %q, reads back as %+v, %v", c.in, got.String(), again, err)
		}
	}
	for _, in := range []string{
		"", " ", "%", "-1", "-1%", "100%", "150%", "NaN%", "Inf%", "1e3", "1.5", "1.5GiB", "ten", "10 %%",
		"10mib", "GiB", "0x10", "1048577TiB", "9223372036854775807", "99999999999999999999", "12 34",
		strings.Repeat("9", 10000), "10%;rm", "1,000",
	} {
		if f, err := ParseFreeSpace(in); err == nil {
			t.Errorf("ParseFreeSpace(%q) = %+v, want an error", in, f)
		} else if len(err.Error()) > 300 {
			t.Errorf("ParseFreeSpace(%q): a %d-byte message repeats the hostile value", in[:10], len(err.Error()))
		}
	}
}

// The free-space configs are dynamic broker configs, checked as every
// other: the name and value, then what is allowed.
func TestValidateFreeSpaceConfigs(t *testing.T) {
	for _, name := range []string{FreeSpaceWarnConfig, FreeSpaceRefuseConfig} {
		for _, v := range []string{"0", "10%", "512MiB", "1099511627776"} {
			if err := ValidateBrokerConfig(name, v); err != nil {
				t.Errorf("%s=%s: %v", name, v, err)
			}
		}
		for _, v := range []string{"-5", "101%", "100%", "lots", "", "2^30"} {
			err := ValidateBrokerConfig(name, v)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v, want INVALID_CONFIG naming the config", name, v, err)
			}
		}
	}
}

func TestCheckFreeSpaceFits(t *testing.T) {
	const total = 500 << 20
	for _, c := range []struct {
		v  string
		ok bool
	}{
		{"499MiB", true}, {"500MiB", false}, {"1TiB", false}, {"99%", true}, {"0", true},
	} {
		f, err := ParseFreeSpace(c.v)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckFreeSpaceFits(FreeSpaceRefuseConfig, f, total)
		if (err == nil) != c.ok {
			t.Errorf("%s on a 500 MiB disk: %v, want ok=%v", c.v, err, c.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "could never be met")) {
			t.Errorf("%s: %v, want INVALID_CONFIG saying it could never be met", c.v, err)
		}
	}
	// A disk that cannot be read (total -1 or 0) checks nothing.
	if err := CheckFreeSpaceFits(FreeSpaceWarnConfig, FreeSpace{Bytes: 1 << 40}, -1); err != nil {
		t.Errorf("unknown disk size: %v", err)
	}
}

func TestImageFreeSpaceThresholds(t *testing.T) {
	img := &Image{BrokerConfigs: map[int32]map[string]string{
		-1: {FreeSpaceRefuseConfig: "5%", FreeSpaceWarnConfig: "20%"},
		2:  {FreeSpaceRefuseConfig: "1GiB"},
	}}
	warn, refuse, ws, rs := img.FreeSpaceThresholds(2)
	if !ws || !rs || warn != (FreeSpace{Percent: true, Share: 20}) || refuse != (FreeSpace{Bytes: 1 << 30}) {
		t.Errorf("broker 2: warn %+v (%v) refuse %+v (%v): want the default's 20%% and its own 1GiB", warn, ws, refuse, rs)
	}
	if _, _, ws, rs := (&Image{}).FreeSpaceThresholds(2); ws || rs {
		t.Errorf("an image without broker configs sets thresholds")
	}
}

// The replay budget's configs: whole numbers, the rate at least 1.
func TestValidateReplayConfigs(t *testing.T) {
	for _, c := range []struct{ name, v string }{
		{ReplayRateConfig, "1"}, {ReplayRateConfig, "104857600"}, {ReplayTailConfig, "0"}, {ReplayTailConfig, "67108864"},
	} {
		if err := ValidateBrokerConfig(c.name, c.v); err != nil {
			t.Errorf("%s=%s: %v", c.name, c.v, err)
		}
	}
	for _, c := range []struct{ name, v string }{
		{ReplayRateConfig, "0"}, {ReplayRateConfig, "-1"}, {ReplayRateConfig, "10MB"}, {ReplayRateConfig, "1.5"},
		{ReplayTailConfig, "-1"}, {ReplayTailConfig, "lots"}, {ReplayTailConfig, "99999999999999999999"},
	} {
		if err := ValidateBrokerConfig(c.name, c.v); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s=%q: %v, want INVALID_CONFIG naming it", c.name, c.v, err)
		}
	}
	img := &Image{BrokerConfigs: map[int32]map[string]string{-1: {ReplayRateConfig: "1000"}, 2: {ReplayTailConfig: "5"}}}
	if rate, tail := img.ReplayBudget(2); rate != 1000 || tail != 5 {
		t.Errorf("broker 2: rate %d tail %d, want the default's 1000 and its own 5", rate, tail)
	}
	if rate, tail := (&Image{}).ReplayBudget(1); rate != 0 || tail != DefaultReplayTailBytes {
		t.Errorf("unset: rate %d tail %d", rate, tail)
	}
}
