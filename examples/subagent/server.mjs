// A worker with a sub-agent, served by workers/node (docs/subagents.md):
//
//     WORKER_SECRET=... node workers/node/cli.mjs examples/subagent/server.mjs
//
// The session's agent has one tool, research_weather. Each of its calls is
// delegated to a helper agent whose only tool is get_weather; the helper's
// triggers come with `parent` (the research_weather call), and its final
// message is research_weather's result.
import { delegate } from "../../workers/node/index.mjs";

const forecasts = { "San Francisco": "foggy", Tokyo: "clear" };
const model = process.env.WORKER_MODEL ?? "claude-haiku-4-5-20251001";

const getWeather = {
    name: "get_weather",
    description: "Get the weather for a city.",
    input: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
};

const helper = {
    model,
    stream: true,
    system: "You are a helper agent. You get a JSON list of cities: call get_weather once for each, then report what each call returned, one sentence per city.",
    tools: [getWeather],
};

export function decide({ trigger, proposed, parent }) {
    if (trigger.type === "session.start") {
        return {
            agent: {
                model,
                stream: true,
                tools: [{
                    name: "research_weather",
                    description: "Ask a helper agent to research the weather in several cities.",
                    input: { type: "object", properties: { cities: { type: "array", items: { type: "string" } } }, required: ["cities"] },
                    output: { type: "string" },
                    retry: { timeout: "2m" },
                }],
            },
        };
    }
    if (trigger.type === "tool.execute" && trigger.name === "research_weather" && !parent) {
        return delegate(helper);
    }
    if (trigger.type === "tool.execute" && trigger.name === "get_weather" && parent) {
        const { city } = trigger.input.value;
        const sky = forecasts[city];
        if (!sky) return { actions: [{ type: "tool.error", error: `No forecast for ${city}.` }] };
        return { actions: [{ type: "tool.result", result: `It's ${sky} in ${city}.` }] };
    }
    return proposed;
}
