//go:build !unix

package replica

import "errors"

func DiskSpace(string) (int64, int64, error) {
	return 0, 0, errors.New("disk space is not reported on this platform")
}
