// Command gatewaybench measures the gateway against the floor: a bare
// coder/websocket echo server on the same machine.
//
// It builds a gateway from the packages (engine.New with a test model that
// calls the client tool "echo" on every user turn and replies "done" after
// the result, a ToolWorker declaring echo with handler client,
// gateway.New) and runs it in a child process: it
// re-executes itself with -serve gateway. The echo floor runs the same way
// (-serve echo). Each phase gets a fresh child, so no phase inherits
// another's sessions, and the child's memory is the server's alone: the
// simulated browsers live in the parent and never share its heap or RSS.
//
// Every simulated browser does what a page does: GET / for the cookie, a
// WebSocket to /ws, session.open {tools: ["echo"]}, then user messages; it
// answers each tool.call at once with tool.result, echoing the arguments.
//
// Phases (-phases, default all, in this order):
//
//	latency     one connection, sequential: the echo round trip (floor), the
//	            client-tool round trip (tool.call arrival to tool.finished
//	            arrival, at the browser) and the turn (message sent to
//	            session.idle); ratio = gateway / echo at p50 and p99.
//	throughput  -sessions browsers in closed loop for -duration after
//	            -warmup: client tool calls settled per second, the same
//	            latencies under load, the CPU each process used per call,
//	            and the echo floor at the same connection count.
//	stream      -stream-sessions browsers ask for -stream-deltas deltas
//	            -stream-interval apart; the model stamps each delta with
//	            CLOCK_MONOTONIC (system-wide, so valid across the two
//	            processes) and the browser computes now - stamp on arrival.
//	            The floor first: the echo server, sent "stream N INTERVAL",
//	            writes N stamped frames shaped like a model.delta, as far
//	            apart; its one way is what the target adds 10 µs to.
//	idle        -idle sessions connected and left idle: the server's VmRSS,
//	            HeapInuse and StackInuse after two GCs (what pools held goes
//	            with the second) and FreeOSMemory, before and after, divided
//	            by -idle; the same for the echo server, and the browsers'
//	            own cost in this process. On JetStream both readings wait
//	            for the store's caches to expire, as the parked phase's do.
//	parked      -parked sessions opened, 30 to a browser, each page leaving
//	            at once; the gateway (started with -unload 1s) takes them out
//	            of memory. The same readings after they all unloaded give
//	            what an idle session with no page costs: goroutines, RSS,
//	            HeapInuse and HeapAlloc (its live objects; the difference is
//	            heap the sessions' peak left partly filled). Then as many
//	            again, read the same way: what one more parked session
//	            costs a gateway whose heap a first batch already grew (the
//	            verdict is the first batch's).
//	            On JetStream the readings wait 12 s more, until the embedded
//	            server's caches of the last writes expire (10 s after their
//	            last use): block buffers of up to the server's block size
//	            (8 MiB) per stream, not what a session parked for minutes
//	            holds.
//
// -store takes a comma-separated list (make bench: memory,jetstream): every
// phase runs on each store in turn, and the targets are printed for
// each, with the store's own round-trip ratio and throughput targets.
//
// Before the phases, when -peer-aisdk names the Vercel AI SDK's harness
// (default ../shared/peers/aisdk, relative to the working directory), it is
// copied to a temporary folder and its run.sh run there; its last line's
// median and round trips per second at 16 clients are set beside the
// gateway's client-tool round trip p50 and calls settled per second. Without
// the harness the run says so and goes on.
//
// In latency and throughput, a browser moves to a new session (a new page
// load) every -session-turns turns (default 20): the engine copies the whole
// transcript into every model request, so a turn costs more the longer its
// session is, and one session for the whole run would measure transcript
// length rather than the gateway. -calls-per-turn makes the model call echo K times in
// parallel per user turn, which spreads a turn's fixed cost over K calls.
//
// Profiles: -cpuprofile covers the gateway process during the throughput
// window; -memprofile is the gateway's heap with -idle sessions connected.
// Read them with `go tool pprof -top FILE`.
//
// With -url the phases run against a gateway that is already running (whose
// agent must declare the client tool echo and whose model must call it on
// each user turn, such as `gatewaybench -serve gateway -listen ADDR`); its
// memory is read from its /bench/stats endpoint when it has one, else from
// /proc/PID/status with -pid. The floor still runs in a child.
//
// The run is bounded by -timeout; every phase stops its browsers, its
// goroutines and its child before the next starts. The exit status is 1
// when a phase failed (protocol errors, a server that did not start), never
// because a target was missed: timings go in docs/benchmarks.md.
package main
