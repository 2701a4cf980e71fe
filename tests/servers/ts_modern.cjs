// Modern-only (2026-07-28) upstream on the TypeScript server SDK 2.x: createMcpHandler with
// legacy: 'reject', on plain node:http bound to 127.0.0.1 (port from argv[2], 0 = any), announced
// on stderr. The SDK is taken from $TROUPE_PEERS_DIR/node_modules, where the test peers live.
'use strict';
const http = require('node:http');
const path = require('node:path');
const { createRequire } = require('node:module');

const peers = createRequire(path.join(process.env.TROUPE_PEERS_DIR || '.peers', 'node_modules', 'x.js'));
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
const httpServer = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const hasBody = !['GET', 'HEAD'].includes(req.method);
  const request = new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers: req.headers,
    body: hasBody ? Buffer.concat(chunks) : undefined });
  const abort = new AbortController();
  res.on('close', () => abort.abort());  // the client closed the response: that is the cancel
  try {
    const response = await handler.fetch(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    if (response.body) {
      for await (const chunk of response.body) {
        if (abort.signal.aborted) break;
        res.write(chunk);
      }
    }
  } catch (err) {
    if (!res.headersSent) res.writeHead(500);
  }
  res.end();
});
httpServer.listen(Number(process.argv[2] || 0), '127.0.0.1', () => {
  console.error(`ts_modern: serving http://127.0.0.1:${httpServer.address().port}/mcp`);
});
