// How this suite starts the gateway (the kit's gatewayOptions): the binary
// `make build` writes, and this suite's own script.
import type { GatewayOptions } from "@clienttools/gateway-testkit";

export const gatewayOptions: GatewayOptions = {
    binary: new URL("../../bin/gateway", import.meta.url),
    script: new URL("script.json", import.meta.url),
};
