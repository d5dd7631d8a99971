// The wire's code conforms to the kit's declarations: `make types` compiles
// wire.js with checkJs and assigns what it exports to what index.d.ts
// declares. A declared method the code lacks, or a signature it does not
// accept, fails here.
import * as impl from "./wire.js";
import type * as api from "./index.js";

export const attachWire: typeof api.attachWire = impl.attachWire;
export const wire: api.Wire = null as unknown as InstanceType<typeof impl.Wire>;
export const call: api.ToolCall = null as unknown as InstanceType<typeof impl.ToolCall>;
