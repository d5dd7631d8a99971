// Package control lets the operator's commands on the store (gateway
// sessions, gateway delete, gateway backup) reach a gateway that is
// running on the embedded store: the data directory's lock lets one process in, so the
// gateway answers them itself, over a Unix socket in that directory
// (SocketName), HTTP on it. The socket is the operator's, as the data
// directory is: only a process of the gateway's user, or root, may use it
// (its file's mode is 0600, and on Linux each connection's user is
// checked; Dial checks the listener's user alike), and no browser can
// reach it.
//
// Listen and Handler serve it (the gateway's binary wires them); Dial
// reaches it, and says ErrNotRunning when no gateway answers there, so the
// command opens the store itself.
//
// A Handler is safe for concurrent use; each request runs on the HTTP
// server's goroutine, bounded by the request's context and DeleteTimeout.
package control
