// A chat page in TypeScript against the SDK package: what docs/sdk.md
// shows, typed. `make types` compiles it (tsc --noEmit), so a declaration
// that stops fitting the documented use fails the build.
import { connect, FRAME_ERROR, LimitError, ToolError, TOOL_ERROR, type GatewayClient, type Tool, type ToolCard } from "@clienttools/gateway";
import { CLOSE } from "@clienttools/gateway/codes";

type Weather = { city: string; forecast: string };

const lookup: Tool<{ city: string }, Weather> = {
    run: async ({ city }, { signal, attempt, attempts, progress }) => {
        progress({ message: `asking, attempt ${attempt} of ${attempts}` });
        const res = await fetch(`/api/weather/${encodeURIComponent(city)}`, { signal });
        if (res.status === 404) throw new ToolError(`There is no city "${city}".`, { code: TOOL_ERROR.TOOL_FAILED });
        if (!res.ok) throw new ToolError(`The weather service answered ${res.status}.`, { retryable: true });
        return { city, forecast: await res.text() };
    },
};

const client: GatewayClient = connect({
    tools: {
        get_local_time: () => ({ time: new Date().toISOString(), timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone }),
        lookup,
        confirm: {
            acceptInvalid: true,
            run: (input, ctx) => {
                ctx.signal.throwIfAborted();
                return { approved: window.confirm(String(input?.question ?? ctx.call.arguments)) };
            },
        },
    },
    storage: null,
    reconnect: { initialDelay: 500 },
});

const log = document.getElementById("log")!;
const cards = new Map<string, HTMLElement>();

client.on("state", ({ state, code, retryIn }) => {
    if (state === "closed" && code === CLOSE.UNRESPONSIVE) console.info(`missed pings; retrying in ${retryIn} ms`);
});
client.on("delta", ({ text, replayed }) => {
    if (!replayed) log.append(text);
});
client.on("message", ({ message }) => {
    if (message.role === "assistant") log.append(document.createElement("hr"));
});
client.on("tool", (card: ToolCard) => {
    const el = cards.get(card.id) ?? log.appendChild(document.createElement("p"));
    cards.set(card.id, el);
    el.textContent = `${card.name}: ${card.status}${card.where === "elsewhere" ? " (another tab)" : ""}`;
    if (card.approval && card.approve) card.approve(true);
    if (card.status === "done") console.log(card.value);
});
client.on("error", ({ code, seq }) => {
    if (seq === undefined && code === FRAME_ERROR.RATE_LIMITED) console.warn("the gateway slows this page down");
});
const stop: () => void = client.on("idle", () => stop());

export function send(text: string): string | null {
    try {
        client.send(text);
        return null;
    } catch (err) {
        if (err instanceof LimitError) return `${err.message} (${err.bytes} > ${err.limit})`;
        throw err;
    }
}

export const status = (): string => `${client.state} ${client.session ?? "-"} seq ${client.seq} of ${client.limits.messageBytes} bytes`;
