// Shared glue for the TypeScript server SDK 2.x test servers: the SDK from the peers directory, and a
// fetch-shaped MCP handler served on plain node:http bound to 127.0.0.1, announced on stderr.
'use strict';
const http = require('node:http');
const path = require('node:path');
const { createRequire } = require('node:module');

// The SDK lives where the test peers live ($TROUPE_PEERS_DIR), not next to this file.
const peers = createRequire(path.join(process.env.TROUPE_PEERS_DIR || '.peers', 'node_modules', 'x.js'));

/** Serve handler.fetch on 127.0.0.1:port (0 = any) and announce "NAME: serving http://…/mcp". */
function serve(name, port, fetchHandler) {
  const httpServer = http.createServer(async (req, res) => {
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const hasBody = !['GET', 'HEAD'].includes(req.method);
    const abort = new AbortController();
    res.on('close', () => abort.abort());  // the client closed the response: that is the cancel
    const request = new Request(`http://127.0.0.1${req.url}`, {
      method: req.method, headers: req.headers, body: hasBody ? Buffer.concat(chunks) : undefined,
      signal: abort.signal });
    try {
      const response = await fetchHandler(request);
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
  httpServer.listen(port, '127.0.0.1', () => {
    console.error(`${name}: serving http://127.0.0.1:${httpServer.address().port}/mcp`);
  });
  return httpServer;
}

module.exports = { peers, serve };
