// Package tlsconf is Fjord's TLS: the broker's certificate, key and
// trust store loaded from PEM files and reloaded when they change
// (Store), the crypto/tls configurations built from them for the Kafka
// listener and for inter-broker dialing (ServerConfig, ClientConfig),
// Kafka's SSL principal for a client that presented a certificate
// (Principal, PrincipalMapper), and a small certificate authority for
// tests and `fjord dev --tls` (CA).
//
// # Files and reload
//
// A Store holds one immutable snapshot of its files: the certificate
// chain and key (Files.CertFile, Files.KeyFile) and the trust store for
// peers' certificates (Files.CAFile). Every new handshake asks the Store
// for its snapshot; at most once per Options.CheckInterval that request
// also stats the files and, if any changed, loads and validates the new
// set, which replaces the snapshot only if the whole set is good. There
// is no goroutine and no file watcher: a broker that accepts no
// connection does no work, and a rotation is seen by the first handshake
// after it (plus at most one interval). Connections already open keep
// the state they negotiated.
//
// The rotation shapes this has to get right:
//
//   - Replace by rename (atomic; also Kubernetes' symlink swap of a
//     mounted Secret, since Stat follows links): the inode changes.
//   - Write in place: the size or mtime changes, and a check that reads
//     the file half-written fails to parse and keeps the old set.
//   - Certificate written before its key (or the reverse): the pair
//     does not match for a moment. The old set stays in force, the error
//     is reported once, and every later check retries until the pair
//     matches.
//   - Written twice within the file system's mtime granularity with the
//     same size (a same-length certificate rewritten in place a
//     millisecond after the last check): the stat alone cannot see it.
//     As git does for its index ("racy git"), a file whose mtime was too
//     close to the moment it was read is not trusted by stat: later
//     checks compare its content (SHA-256) until a read happens
//     racyWindow after its mtime.
//
// # Threads
//
// Every method of Store, and the callbacks of the configurations it
// builds, may be called from any goroutine at once. A check runs on the
// goroutine of the handshake that found the interval elapsed; handshakes
// that arrive during a check do not wait for it, they use the snapshot
// in force (Store.mu is only ever TryLock'ed on that path).
// Options.OnReload and Options.OnReloadError run on that goroutine after
// the lock is released.
//
// # Kafka's SSL principal
//
// Kafka names a client that authenticated with a certificate
// "User:" + the subject of its leaf certificate as Java's
// X500Principal.getName() prints it (RFC 2253 style), after
// ssl.principal.mapping.rules (default "DEFAULT": the name unchanged).
// ACLs, quotas and the principal in logs are written against that
// string, so Fjord must produce it byte for byte: operators copy ACLs
// between Kafka and Fjord. Go's pkix.Name.String() is a different
// format; see principal.go for the differences and how
// DistinguishedName reproduces Java's.
package tlsconf
