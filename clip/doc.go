// Package clip cuts a text to a number of bytes without splitting a UTF-8
// character (To; Marked adds a mark when it cut), for what the gateway
// quotes of something it did not write: a page's frame in an error, an
// upstream's error message, a worker's reply, a WebSocket close reason
// (123 bytes at most). Cut texts end in a mark the caller chooses ("...",
// "…"), so a reader sees that more was said.
//
// Its functions are pure and safe for concurrent use.
package clip
