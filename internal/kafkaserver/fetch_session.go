package kafkaserver

// Incremental fetch sessions (KIP-227).
//
// A consumer of many partitions would otherwise send every partition in
// every fetch and get every partition back. With a session, the broker
// remembers the partitions (and what it last told the client about each),
// the client sends only partitions whose fetch offset or byte limit
// changed, and the broker answers only partitions with something new.
//
// A request's (session id, epoch) picks what happens:
//
//	id   epoch
//	0    -1     sessionless full fetch (and every request before v7)
//	X    -1     close session X, then a sessionless full fetch
//	any  0      close session X if given, then a full fetch that opens a
//	            new session (id 0 in the answer if the cache is disabled)
//	X    N>0    incremental fetch in session X: FETCH_SESSION_ID_NOT_FOUND
//	            if X is not cached, INVALID_FETCH_SESSION_EPOCH unless N is
//	            the epoch X expects next
//
// An incremental request adds or updates the partitions it names and
// removes its forgotten topics' partitions; the fetch then reads every
// partition of the session. The answer holds a partition only if it has
// records, an error, or a high watermark, last stable offset or log start
// offset different from the last one sent. A full fetch answers every
// partition it asked for.
//
// Sessions are keyed by topic name before Fetch v13 and by topic id from
// v13; a session used with the other kind is FETCH_SESSION_TOPIC_ID_ERROR.
//
// The cache holds at most max.incremental.fetch.session.cache.slots
// sessions; creating one more evicts the least recently used, whose
// client then gets FETCH_SESSION_ID_NOT_FOUND and starts a new session
// (clients handle that; it costs one full fetch). Kafka also protects
// large and recently used sessions from eviction; plain LRU is enough
// while a node has a few hundred consumers, and is easy to reason about.
//
// Threads: the cache has one lock for its map and LRU list; each session
// has its own lock for its partitions. Neither is held while a fetch
// long-polls: a request copies what it must read under the session lock,
// reads without locks, and takes the lock again to record what it
// answered (update). Lock order: cache.mu -> session.mu, never the
// reverse.

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/fjordmq/fjord/internal/metadata"
)

// defaultFetchSessionCacheSlots is Kafka's
// max.incremental.fetch.session.cache.slots.
const defaultFetchSessionCacheSlots = 1000

// KIP-227's special epochs.
const (
	initialSessionEpoch int32 = 0
	finalSessionEpoch   int32 = -1
)

// sessionPartKey names a partition in a session: by topic id (v13+,
// topic empty) or by topic name (before v13, topicID zero).
type sessionPartKey struct {
	topicID   metadata.UUID
	topic     string
	partition int32
}

// fetchReqPartition is one partition to read, with its request-level
// settings.
type fetchReqPartition struct {
	key                sessionPartKey
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32
	// lastFetchedEpoch is a follower's (v12+), -1 when not given.
	lastFetchedEpoch int32
	// logStartOffset is a follower's log start offset (v5+), -1 when
	// not given.
	logStartOffset int64
}

// partState is what a fetch answered for one partition: what the session
// compares with what it last sent.
type partState struct {
	errCode          int16
	highWatermark    int64
	lastStableOffset int64
	logStartOffset   int64
	hasRecords       bool
	// redirects: the answer names a preferred read replica (KIP-392),
	// which an incremental answer always carries, as Kafka's does.
	redirects bool
}

// sessionPartition is a partition in a session: the client's settings and
// what it was last told.
type sessionPartition struct {
	fetchReqPartition
	sent partState
	// sentOnce is false until the partition was in an answer.
	sentOnce bool
}

// fetchSession is one cached session.
type fetchSession struct {
	id      int32
	usesIDs bool
	elem    *list.Element // in fetchSessionCache.mu.lru

	mu struct {
		sync.Mutex
		// epoch is the epoch the next incremental request must carry.
		epoch int32
		// parts in insertion order; index maps a key to its position.
		parts []*sessionPartition
		index map[sessionPartKey]int
	}
}

// fetchSessionCache holds the sessions of every connection: a client may
// continue its session on a new connection.
type fetchSessionCache struct {
	slots int // <= 0: sessions disabled

	mu struct {
		sync.Mutex
		sessions map[int32]*fetchSession
		lru      list.List // front: most recently used; values *fetchSession
	}
}

func newFetchSessionCache(slots int) *fetchSessionCache {
	c := &fetchSessionCache{slots: slots}
	c.mu.sessions = make(map[int32]*fetchSession)
	return c
}

// fetchContext is how one fetch request reads and answers: which
// partitions to read and which results go in the answer.
type fetchContext struct {
	// errCode, if not 0, is the answer's top-level error; nothing is
	// read.
	errCode int16
	// sessionID is the session id to answer with (0: none).
	sessionID int32
	// incremental answers only partitions with news.
	incremental bool
	session     *fetchSession
	// parts is what to read, in answer order.
	parts []fetchReqPartition
}

// newContext resolves a fetch request's session fields. parts are the
// request's partitions in request order, forgotten its forgotten topics'
// partitions; usesIDs says whether keys are by topic id (v13+).
func (c *fetchSessionCache) newContext(sessionID, epoch int32, usesIDs bool, parts []fetchReqPartition, forgotten []sessionPartKey) *fetchContext {
	if epoch == initialSessionEpoch || epoch == finalSessionEpoch {
		if sessionID != 0 {
			c.remove(sessionID)
		}
		fc := &fetchContext{parts: parts}
		if epoch == initialSessionEpoch {
			if s := c.create(usesIDs, parts); s != nil {
				fc.session = s
				fc.sessionID = s.id
			}
		}
		return fc
	}
	if epoch < 0 {
		// Only -1 is a special negative epoch.
		return &fetchContext{errCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	s := c.get(sessionID)
	if s == nil {
		return &fetchContext{errCode: kerr.FetchSessionIDNotFound.Code}
	}
	if s.usesIDs != usesIDs {
		return &fetchContext{errCode: kerr.FetchSessionTopicIDError.Code}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if epoch != s.mu.epoch {
		return &fetchContext{errCode: kerr.InvalidFetchSessionEpoch.Code}
	}
	s.mu.epoch = nextSessionEpoch(s.mu.epoch)
	for _, p := range parts {
		if i, ok := s.mu.index[p.key]; ok {
			s.mu.parts[i].fetchReqPartition = p
			continue
		}
		s.addLocked(p)
	}
	for _, k := range forgotten {
		s.removeLocked(k)
	}
	fc := &fetchContext{sessionID: s.id, incremental: true, session: s}
	fc.parts = make([]fetchReqPartition, len(s.mu.parts))
	for i, sp := range s.mu.parts {
		fc.parts[i] = sp.fetchReqPartition
	}
	return fc
}

// update records what was answered for fc.parts (results[i] answers
// fc.parts[i]) and returns which of them belong in the answer.
func (fc *fetchContext) update(results []partState) (include []bool) {
	include = make([]bool, len(results))
	if fc.session == nil {
		for i := range include {
			include[i] = true
		}
		return include
	}
	s := fc.session
	s.mu.Lock()
	defer s.mu.Unlock()
	var gaveRecords map[*sessionPartition]bool
	for i, r := range results {
		idx, ok := s.mu.index[fc.parts[i].key]
		if !ok {
			// Forgotten by a later request while this one read.
			include[i] = !fc.incremental
			continue
		}
		sp := s.mu.parts[idx]
		include[i] = !fc.incremental || sp.news(r)
		if include[i] {
			sp.sent = r
			sp.sentOnce = true
		}
		if r.hasRecords {
			if gaveRecords == nil {
				gaveRecords = map[*sessionPartition]bool{}
			}
			gaveRecords[sp] = true
		}
	}
	s.rotateLocked(gaveRecords)
	return include
}

// rotateLocked moves the partitions that returned records to the end of
// the session's order, keeping the order within each group (Kafka's
// IncrementalFetchContext does the same). A fetch reads its partitions
// in session order and the byte limits (the fetch's, a consumer's quota,
// the replay budget) fill from the first: without this the partitions
// first in a session would take every fetch's bytes while the rest
// waited.
// REQUIRES: s.mu held.
func (s *fetchSession) rotateLocked(gaveRecords map[*sessionPartition]bool) {
	if len(gaveRecords) == 0 || len(gaveRecords) == len(s.mu.parts) {
		return
	}
	rest := make([]*sessionPartition, 0, len(gaveRecords))
	kept := s.mu.parts[:0]
	for _, sp := range s.mu.parts {
		if gaveRecords[sp] {
			rest = append(rest, sp)
		} else {
			kept = append(kept, sp)
		}
	}
	s.mu.parts = append(kept, rest...)
	for i, sp := range s.mu.parts {
		s.mu.index[sp.key] = i
	}
}

// news reports whether r tells the client something it was not told.
func (sp *sessionPartition) news(r partState) bool {
	if !sp.sentOnce || r.errCode != 0 || r.hasRecords || r.redirects {
		return true
	}
	return r.highWatermark != sp.sent.highWatermark ||
		r.lastStableOffset != sp.sent.lastStableOffset ||
		r.logStartOffset != sp.sent.logStartOffset
}

// nextSessionEpoch is the epoch after e, wrapping to 1 (0 and -1 are
// special).
func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// REQUIRES: s.mu held.
func (s *fetchSession) addLocked(p fetchReqPartition) {
	s.mu.index[p.key] = len(s.mu.parts)
	s.mu.parts = append(s.mu.parts, &sessionPartition{fetchReqPartition: p})
}

// REQUIRES: s.mu held.
func (s *fetchSession) removeLocked(k sessionPartKey) {
	i, ok := s.mu.index[k]
	if !ok {
		return
	}
	s.mu.parts = append(s.mu.parts[:i], s.mu.parts[i+1:]...)
	delete(s.mu.index, k)
	for j := i; j < len(s.mu.parts); j++ {
		s.mu.index[s.mu.parts[j].key] = j
	}
}

// create opens a session holding parts, evicting the least recently
// used session if the cache is full. It returns nil if sessions are
// disabled.
func (c *fetchSessionCache) create(usesIDs bool, parts []fetchReqPartition) *fetchSession {
	if c.slots <= 0 {
		return nil
	}
	s := &fetchSession{usesIDs: usesIDs}
	s.mu.epoch = nextSessionEpoch(initialSessionEpoch)
	s.mu.index = make(map[sessionPartKey]int, len(parts))
	for _, p := range parts {
		if _, dup := s.mu.index[p.key]; dup {
			continue
		}
		s.addLocked(p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.mu.sessions) >= c.slots {
		oldest := c.mu.lru.Back().Value.(*fetchSession)
		c.removeLocked(oldest.id)
	}
	for {
		// Random ids, so a client cannot guess another's session; never
		// 0 (no session).
		id := rand.Int32N(math.MaxInt32) + 1
		if _, taken := c.mu.sessions[id]; !taken {
			s.id = id
			break
		}
	}
	s.elem = c.mu.lru.PushFront(s)
	c.mu.sessions[s.id] = s
	return s
}

// get returns session id, marking it used, or nil.
func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.mu.sessions[id]
	if !ok {
		return nil
	}
	c.mu.lru.MoveToFront(s.elem)
	return s
}

func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(id)
}

// REQUIRES: c.mu held.
func (c *fetchSessionCache) removeLocked(id int32) {
	if s, ok := c.mu.sessions[id]; ok {
		c.mu.lru.Remove(s.elem)
		delete(c.mu.sessions, id)
	}
}

// len returns the number of cached sessions.
func (c *fetchSessionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.sessions)
}
