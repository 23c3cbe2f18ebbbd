package node

// The node's audit log (issue 20, slice 4; internal/audit): the Kafka
// listeners' authentication results and authorization denials, and the
// HTTP API's, as JSON lines in one file. It is opened first at start, so
// a path the node cannot write stops it before anything else is touched,
// and closed last, after everything that records to it has stopped.

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/fjordmq/fjord/internal/audit"
)

// AuditConfig is the audit log's settings (`fjord serve --audit-log`).
type AuditConfig struct {
	// Path is the log's file; its directory must exist. Empty: no audit
	// log.
	Path string
	// MaxBytes is the size at which the file is rotated to Path+".1"
	// (replacing the last), so the two hold at most twice it. 0:
	// audit.DefaultMaxBytes.
	MaxBytes int64
}

// check names a bad setting by its flag.
func (c AuditConfig) check() error {
	switch {
	case c.MaxBytes != 0 && c.Path == "":
		return fmt.Errorf("%w: audit-log-max-bytes is set but audit-log is not: give the audit log's path", ErrInvalidConfig)
	case c.MaxBytes < 0 || (c.MaxBytes > 0 && c.MaxBytes < audit.MinMaxBytes):
		return fmt.Errorf("%w: audit-log-max-bytes %d: allowed: %d or more, or 0 for the default", ErrInvalidConfig, c.MaxBytes, audit.MinMaxBytes)
	case c.Path != "" && strings.TrimSpace(c.Path) != c.Path:
		// Almost certainly a slip in a config file; the file would be
		// created under a name that is hard to find.
		return fmt.Errorf("%w: audit-log %q starts or ends with white space", ErrInvalidConfig, c.Path)
	}
	return nil
}

// openAudit opens the audit log if one is configured.
func (n *Node) openAudit() error {
	c := n.cfg.AuditLog
	if c.Path == "" {
		return nil
	}
	l, err := audit.Open(c.Path, audit.Config{MaxBytes: c.MaxBytes, Logger: n.log})
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("audit-log: %w (its directory must exist and be writable by this process)", err)
	case err != nil:
		return fmt.Errorf("audit-log: %w", err)
	}
	n.audit = l
	return nil
}

// auditRecorder is what the listeners record to: nil without an audit
// log (an interface holding a nil *audit.Log would not be nil).
func (n *Node) auditRecorder() audit.Recorder {
	if n.audit == nil {
		return nil
	}
	return n.audit
}

// closeAudit writes what the audit log holds and closes it.
func (n *Node) closeAudit() error {
	if n.audit == nil {
		return nil
	}
	return n.audit.Close()
}
