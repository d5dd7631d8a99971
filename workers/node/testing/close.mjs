// Shared by the tests in test/ (kept out of test/, where node --test would
// run it as a test file of its own): stopping a server the tests started.

/**
 * Closes server with every connection it has. close() alone waits for a
 * connection that has not sent a request, and fetch opens a spare one after
 * an aborted request: it stays until the client's keep-alive ends, 64 s
 * when it read our Keep-Alive header.
 */
export function closeServer(server) {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
}
