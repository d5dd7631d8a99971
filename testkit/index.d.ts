// Declarations of @clienttools/gateway-testkit (index.js, gateway.js,
// wire.js): Playwright fixtures and helpers for end-to-end tests of a chat
// UI on the client-tools gateway. Guide: docs/testing.md.

import type {
    Page,
    PlaywrightTestArgs,
    PlaywrightTestOptions,
    PlaywrightWorkerArgs,
    PlaywrightWorkerOptions,
    TestType,
} from "@playwright/test";

export { expect } from "@playwright/test";

/** A frame on the wire (docs/protocol.md): session events carry `seq`. */
export interface Frame {
    type: string;
    seq?: number;
    [field: string]: any;
}

/** How startGateway runs the binary. */
export interface GatewayOptions {
    /** The gateway binary (a path, or a file: URL); default $GATEWAY_BIN, else bin/gateway, from the working directory. */
    binary?: string | URL;
    /** A script for the scripted model (--script, docs/scripts.md; a path or a file: URL). The kit always passes --offline. */
    script?: string | URL;
    /** "memory" (default): sessions in memory. "jetstream": the durable store, in a new temporary --data-dir. */
    store?: "memory" | "jetstream";
    /** More flags, e.g. ["--client-timeout", "2s"] (docs/gateway.md). */
    args?: string[];
    /** More environment variables for the process. */
    env?: Record<string, string>;
    /** The address to listen on, port picked by the kernel; default 127.0.0.1. */
    host?: string;
    /** --log-level; default "warn". */
    logLevel?: "debug" | "info" | "warn" | "error";
    /** How long to wait for it to listen, in ms; default 30000 (the gateway fixture waits up to 600000). */
    timeout?: number;
    /** The process's working directory; default this process's. */
    cwd?: string;
}

/** A gateway process startGateway started. */
export interface RunningGateway {
    /** Its base URL: http://127.0.0.1:PORT. */
    url: string;
    /** Its WebSocket endpoint: ws://127.0.0.1:PORT/ws. */
    wsURL: string;
    pid: number;
    /** The temporary data directory of store "jetstream" (removed by stop()); else null. */
    dataDir: string | null;
    /** Its stdout and stderr lines so far, each prefixed "stdout: " or "stderr: ". */
    output: string[];
    /** SIGTERM, then SIGKILL after 10 s; resolves with how it exited. Safe to call twice. */
    stop(): Promise<{ code: number | null; signal: string | null }>;
}

/** Starts the gateway binary on a free port and resolves once it listens. */
export declare function startGateway(options?: GatewayOptions): Promise<RunningGateway>;

/** One frame the wire saw. */
export interface WireFrame {
    /** The socket's number: 1 for the page's first, 2 after a reconnect, ... */
    socket: number;
    /** "received": the gateway sent it to the page; "sent": the page (or the test, byTest) sent it. */
    direction: "received" | "sent";
    /** The frame, parsed; a text that is not a JSON object is `{type: "", raw}`. */
    frame: Frame;
    /** The test sent it (ToolCall.answer, fail, Wire.send), not the page. */
    byTest: boolean;
}

export interface WireOptions {
    /** Which sockets to route; default "**\/ws". */
    url?: string | RegExp | ((url: URL) => boolean);
    /** Tools whose calls are held back from the page from the start (see Wire.hold). */
    hold?: string[];
    /** Default timeout of the wire's waits, in ms; default 10000. */
    timeout?: number;
}

/** A tool.call the gateway delivered to the page, as the wire saw it. */
export declare class ToolCall {
    /** The tool.call frame itself. */
    readonly frame: Frame;
    readonly id: string;
    readonly name: string;
    readonly attempt: number;
    /** The parsed arguments (frame.input.value). */
    readonly input: any;
    /** Held back from the page: the test answers it (or deliver()s it). */
    readonly held: boolean;
    /** The socket it came on. */
    readonly socket: number;
    /** Answers this attempt as the page would: tool.result {id, attempt, result}. */
    answer(result: unknown): void;
    /** Fails this attempt as the page would: tool.error {id, attempt, error, ...}. */
    fail(error: string, options?: { retryable?: boolean; code?: string; detail?: unknown }): void;
    /** Hands a held call to the page after all, on the socket it came on. */
    deliver(): void;
}

/** The page's sockets to the gateway, recorded, with fault injection. */
export declare class Wire {
    /** How many sockets the page has opened. */
    readonly sockets: number;
    /** Every frame so far, oldest first; optionally one direction's only. */
    frames(direction?: "received" | "sent"): WireFrame[];
    /** The gateway's refusals of frames: `error` frames without seq (settled, stale_attempt, ...). */
    refusals(): Frame[];
    /** From now on the tool's calls are not delivered to the page: the test answers them. */
    hold(name: string): void;
    /** The page's answers to the tool's calls reach the gateway ms later (lost if the socket closes first). */
    delayAnswers(name: string, ms: number): void;
    /** Each of the page's answers to the tool's calls reaches the gateway `copies` times (default 2). */
    duplicateAnswers(name: string, copies?: number): void;
    /** The page's user messages reach the gateway ms later from now on (0: at once; lost if the socket closes first). */
    delayMessages(ms: number): void;
    /** Each of the page's user messages reaches the gateway `copies` times (default 2). */
    duplicateMessages(copies?: number): void;
    /** The next tool.call of the tool that no earlier toolCall() returned, past or future. */
    toolCall(name: string, options?: { timeout?: number }): Promise<ToolCall>;
    /** The first frame, past or future, that matches. */
    waitForFrame(match: (frame: Frame, wire: WireFrame) => boolean, options?: { direction?: "received" | "sent"; timeout?: number }): Promise<Frame>;
    /** Drops the page's current socket (both sides); the SDK reconnects. Resolves with its number. */
    drop(options?: { code?: number; reason?: string }): Promise<number>;
    /**
     * Stalls the page's current socket: no frame crosses it either way any more, and
     * neither side is closed (a network path that died without a word). The SDK takes it
     * for dead after answerTimeout once it sent a frame the gateway always answers.
     * Resolves with its number.
     */
    stall(): Promise<number>;
    /** Resolves once a socket after the nth (default: the newest now) has opened its session. */
    reconnected(options?: { after?: number; timeout?: number }): Promise<void>;
    /** Sends a frame to the gateway as the page, on its current socket. */
    send(frame: Frame): void;
}

/** Routes page's sockets to the gateway through a new Wire; call before page.goto. */
export declare function attachWire(page: Page, options?: WireOptions): Promise<Wire>;

/** The path of the fake WebSocket's browser script (window.FakeSocket, MemoryStorage, until, sleep). */
export declare const fakeSocketPath: string;

/** Adds the fake WebSocket to every document of page; replaceWebSocket: window.WebSocket is the fake. */
export declare function installFakeSocket(page: Page, options?: { replaceWebSocket?: boolean }): Promise<void>;

/**
 * Every event of session, as the gateway replays it from the start to a tool-less socket of page's browser:
 * to `url` (the gateway's WebSocket URL, `gateway.wsURL`; a page of another origin needs it), else /ws on the page's origin.
 * The socket is not one of the page's: a wire passes it through unrecorded.
 */
export declare function replay(page: Page, session: string, options?: { timeout?: number; url?: string | URL }): Promise<Frame[]>;

export interface TestkitFixtures {
    /** attachWire's options for the `wire` fixture. */
    wireOptions: WireOptions;
    /** The page's sockets to the gateway, attached before the test runs. */
    wire: Wire;
}

export interface TestkitWorkerFixtures {
    /** startGateway's options: set them in your config's `use` or with test.use. */
    gatewayOptions: GatewayOptions;
    /** The gateway, started once per worker; `baseURL` is its url. */
    gateway: RunningGateway;
}

/** Playwright's test with the kit's fixtures. */
export declare const test: TestType<
    PlaywrightTestArgs & PlaywrightTestOptions & TestkitFixtures,
    PlaywrightWorkerArgs & PlaywrightWorkerOptions & TestkitWorkerFixtures
>;
