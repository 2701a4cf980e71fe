// Modern-only (2026-07-28) upstream on the TypeScript server SDK 2.x: createMcpHandler with
// legacy: 'reject', on plain node:http bound to 127.0.0.1 (port from argv[2], 0 = any), announced
// on stderr. The SDK is taken from $TROUPE_PEERS_DIR/node_modules, where the test peers live.
'use strict';
const { peers, serve } = require('./_ts_http.cjs');

const { McpServer, createMcpHandler } = peers('@modelcontextprotocol/server');
const { z } = peers('zod');

function factory() {
  const server = new McpServer({ name: 'ts-modern', version: '1.0.0' });
  server.registerTool('echo', { description: 'Return the given text.', inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: 'text', text }] }));
  server.registerPrompt('hello', { description: 'Greet.', argsSchema: z.object({ who: z.string() }) },
    ({ who }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `Hello, ${who}!` } }] }));
  return server;
}

const handler = createMcpHandler(factory, { legacy: 'reject' });
serve('ts_modern', Number(process.argv[2] || 0), (request) => handler.fetch(request));
