// Package static embeds the browser half of the gateway: the SDK
// (gateway.js, the entry point, and the modules it imports: connection.js,
// store.js, outbox.js, cards.js, runner.js, events.js, codes.js), the chat
// UI (chat.js and the modules it imports: composer.js, follow.js, announce.js,
// status.js, toolcard.js, markdown.js, mdfragment.js, errors.js, dom.js), the
// demo page's tools and the parts around its chat (demo.js, history.js,
// welcome.js), the third-party modules the chat UI uses (vendor/, with their
// licences; `make vendor` copies them from node_modules), the stylesheet and
// icons, so the binary serves /static/ from [FS] with nothing else on disk.
// [Version] is a hash of those files for cache-busting URLs.
//
// The SDK's modules are also the npm package @clienttools/gateway:
// package.json and the TypeScript declarations (types/) sit beside them and
// are not embedded, so /static/ serves only the browser's files.
//
// Its values are read-only after package initialisation and safe for
// concurrent use.
package static
