// The implementation conforms to the declarations: `make types` compiles
// this with allowJs, so `impl` has the types TypeScript infers from the JS
// modules (and their JSDoc), and each must be assignable to what
// gateway.d.ts and codes.d.ts declare. A declared method, option or event
// the code lacks, or a signature the code does not accept, fails here.
import * as impl from "../gateway.js";
import * as implCodes from "../codes.js";
import type * as api from "./gateway.js";
import type * as apiCodes from "./codes.js";

export const gateway: Omit<typeof api, "CLOSE" | "FRAME_ERROR" | "SESSION_ERROR" | "TOOL_ERROR" | "GUARD"> = impl;

// The tables' values are checked one by one against codes.js by the Go
// test TestDeclaredCodes; here, that every declared table and key exists.
type Keys<T> = { [K in keyof T]: keyof T[K] };
export const codes: Keys<typeof apiCodes> = null as unknown as Keys<typeof implCodes>;

// The options and the detail of each event, as the JS declares them.
type ImplOptions = NonNullable<Parameters<typeof impl.connect>[0]>;
export const options: api.ConnectOptions = null as unknown as ImplOptions;
export const card: api.ToolCard = null as unknown as import("../cards.js").ToolCard;
export const context: api.ToolContext = null as unknown as import("../runner.js").ToolContext;
export const call: api.ToolCallFrame = null as unknown as import("../runner.js").ToolCallFrame;
