// Command gateway serves the client-tools chat: run it and open the URL it
// prints. With no flags it works offline on embedded defaults (the scripted
// demo model, the seed's get_weather worker tool, the page's browser tools).
//
// main only wires: it calls run(ctx, args, getenv, stdout, stderr), which parses the flags
// (each also read from its GATEWAY_* variable, docs/deploy.md), builds the
// store, the engine and the HTTP server, serves until ctx ends (SIGTERM or
// SIGINT), then drains and stops them, so tests start the real server on
// port 0 and stop it. Concurrency: run owns every goroutine it starts and
// returns only once they stopped.
//
// Two commands work on the store instead (admin.go): gateway sessions
// lists every chat, and gateway delete deletes chats by id, for an
// operator who must erase someone's data without their cookie.
package main
