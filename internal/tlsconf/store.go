package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"sync"
	"sync/atomic"
	"time"
)

// Files names a Store's PEM files.
type Files struct {
	// CertFile is the certificate, optionally followed by the
	// intermediates that chain it to the peers' trust store (leaf first).
	// KeyFile is its private key (PKCS #8, SEC 1 or PKCS #1, not
	// encrypted). Both or neither; they may name the same file.
	CertFile, KeyFile string
	// CAFile is the trust store for the peers' certificates: clients'
	// certificates on a server, the server's on a client. Without it a
	// server verifies no client certificate (ServerConfig's client auth
	// then refuses every certificate) and a client verifies the server
	// against the system's roots.
	CAFile string
}

// Options tunes a Store. The zero value is ready to use.
type Options struct {
	// CheckInterval is the least time between two looks at the files
	// (default, and when <= 0: 1 s). A look costs a stat per file.
	CheckInterval time.Duration
	// Now is the clock for CheckInterval and for the certificates'
	// validity (default time.Now). Tests inject theirs.
	Now func() time.Time
	// OnReload, if set, is called after a new set of files took force.
	// It and OnReloadError run on the goroutine of the handshake whose
	// check saw the change, after the Store's lock is released (so they
	// may use the Store); two may overlap only if one outlasts
	// CheckInterval. They should be quick: that handshake waits.
	OnReload func()
	// OnReloadError, if set, is called with the reason a changed set of
	// files was refused (the set in force stays). It is called once per
	// distinct change of the files, not at every check: a set that keeps
	// failing is retried silently at every check until it loads.
	OnReloadError func(error)
}

const defaultCheckInterval = time.Second

// Store is the TLS credentials loaded from Files, reloaded when the
// files change. See the package documentation for when it looks and the
// rotations it handles, and its Threads section.
type Store struct {
	paths [numRoles]string
	opts  Options // defaults filled in

	// current is the snapshot new handshakes use. Never nil.
	current atomic.Pointer[snapshot]
	// lastCheck is when (Options.Now, Unix ns) the files were last
	// looked at; only the holder of mu moves it. See checkDue.
	lastCheck atomic.Int64

	mu struct {
		sync.Mutex
		// seen is each file as the last load attempt read it, whether
		// the attempt succeeded or not: a check reloads when the files
		// differ from it, so a failure is reported once per change.
		seen [numRoles]seenFile
		// failing: the last attempt failed, and current is older than
		// the files. Every check retries then (a certificate may have
		// become valid, or the other half of a pair been written).
		failing bool
	}
}

// seenFile is what a check compares a file's new state against.
type seenFile struct {
	stamp fileStamp
	sum   [sha256.Size]byte
	// trusted: stamp changes if the file does (observation
	// .trustedStamp). Until then checks compare sum too.
	trusted bool
}

// snapshot is one loaded, validated set of files and what was built
// from it. Immutable: handshakes read it without locks.
type snapshot struct {
	cert  *tls.Certificate // nil: no CertFile
	roots *x509.CertPool   // nil: no CAFile
	sums  [numRoles][sha256.Size]byte
	// server is ServerConfig's per-handshake config for each ClientAuth,
	// built once per snapshot so a handshake allocates none. nil when
	// cert is.
	server [numClientAuths]*tls.Config
}

// Load reads and validates files and returns a Store serving them. The
// error names the file and what is wrong with it, and wraps one of the
// package's sentinel errors or fs.ErrNotExist.
func Load(files Files, opts Options) (*Store, error) {
	if err := files.validate(); err != nil {
		return nil, err
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = defaultCheckInterval
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{paths: files.paths(), opts: opts}
	now := opts.Now()
	obs := s.observeAll()
	snap, err := s.newSnapshot(&obs, now)
	if err != nil {
		return nil, err
	}
	s.mu.seen = seenFiles(&obs)
	s.current.Store(snap)
	s.lastCheck.Store(now.UnixNano())
	return s, nil
}

// checkDue reports whether a look at the files is due at now: an
// interval has passed since the last one, or the clock went back by more
// than one (UnixNano carries no monotonic reading, so a wall clock
// stepped back an hour would otherwise stop reloads for an hour; a
// handshake whose Now was read a moment before another's is not that).
func (s *Store) checkDue(now int64) bool {
	interval := int64(s.opts.CheckInterval)
	last := s.lastCheck.Load()
	return now-last >= interval || last-now > interval
}

// snapshot returns the snapshot in force, first looking at the files if
// a check is due and no other goroutine is looking already.
func (s *Store) snapshot() *snapshot {
	now := s.opts.Now()
	if !s.checkDue(now.UnixNano()) || !s.mu.TryLock() {
		return s.current.Load()
	}
	var reloaded bool
	var err error
	// Another goroutine may have checked between checkDue and the lock.
	if s.checkDue(now.UnixNano()) {
		s.lastCheck.Store(now.UnixNano())
		reloaded, err = s.checkLocked(now)
	}
	s.mu.Unlock()
	// The callbacks run unlocked so that one may use the Store.
	if reloaded && s.opts.OnReload != nil {
		s.opts.OnReload()
	}
	if err != nil && s.opts.OnReloadError != nil {
		s.opts.OnReloadError(err)
	}
	return s.current.Load()
}

// checkLocked looks at the files and loads them if they changed. It
// returns whether a new snapshot took force, or the error to report (a
// changed set that failed to load; a retry of an unchanged failing set
// is not reported again).
//
// REQUIRES: s.mu held.
func (s *Store) checkLocked(now time.Time) (reloaded bool, report error) {
	if !s.mu.failing && s.statsUnchangedLocked() {
		return false, nil
	}
	obs := s.observeAll()
	changed := false
	for role, o := range obs {
		seen := &s.mu.seen[role]
		if o.stamp != seen.stamp || o.sum != seen.sum {
			changed = true
		} else if !seen.trusted && o.trustedStamp() {
			seen.trusted = true
		}
	}
	if !changed && !s.mu.failing {
		return false, nil
	}
	s.mu.seen = seenFiles(&obs)
	current := s.current.Load()
	if sameContent(&obs, current) {
		// Touched, re-copied, or put back as it was: the snapshot in
		// force already is this content.
		s.mu.failing = false
		return false, nil
	}
	snap, err := s.newSnapshot(&obs, now)
	if err != nil {
		s.mu.failing = true
		if changed {
			return false, err
		}
		return false, nil
	}
	s.mu.failing = false
	s.current.Store(snap)
	return true, nil
}

// statsUnchangedLocked reports whether every file's stamp is trusted and
// the same as seen: then the files are as loaded, at the cost of a stat
// each.
//
// REQUIRES: s.mu held.
func (s *Store) statsUnchangedLocked() bool {
	for role, path := range s.paths {
		if path == "" {
			continue
		}
		seen := s.mu.seen[role]
		if !seen.trusted {
			return false
		}
		st, err := statFile(path)
		if err != nil || st != seen.stamp {
			return false
		}
	}
	return true
}

func (s *Store) observeAll() [numRoles]observation {
	var obs [numRoles]observation
	for role, path := range s.paths {
		if path != "" {
			obs[role] = observe(path)
		}
	}
	return obs
}

func seenFiles(obs *[numRoles]observation) [numRoles]seenFile {
	var seen [numRoles]seenFile
	for role, o := range obs {
		seen[role] = seenFile{stamp: o.stamp, sum: o.sum, trusted: o.trustedStamp()}
	}
	return seen
}

func sameContent(obs *[numRoles]observation, snap *snapshot) bool {
	for role, o := range obs {
		if o.err != nil || o.sum != snap.sums[role] {
			return false
		}
	}
	return true
}

func (s *Store) newSnapshot(obs *[numRoles]observation, now time.Time) (*snapshot, error) {
	p, err := parseFiles(s.paths, obs, now)
	if err != nil {
		return nil, err
	}
	snap := &snapshot{cert: p.cert, roots: p.roots}
	for role, o := range obs {
		snap.sums[role] = o.sum
	}
	if snap.cert != nil {
		for auth := range ClientAuth(numClientAuths) {
			snap.server[auth] = newServerConfig(snap.cert, snap.roots, auth, s.opts.Now)
		}
	}
	return snap, nil
}
