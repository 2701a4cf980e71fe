// The conformance suite's 2026-07-28 server fixtures (tools, resources, prompts, completion, the
// stateless diagnostics and the multi-round-trip tools its scenarios call by name), written on the
// TypeScript server SDK 2.x, modern only: createMcpHandler with the SDK's own Host/Origin checks on
// 127.0.0.1:argv[2] (0 = any, announced on stderr), or serveStdio when argv[2] is `stdio`. The
// suite's npm package ships no fixture server, so this one is ours: each behaviour below is what a
// scenario's description asks of a server.
'use strict';
const { peers, serve } = require('./_ts_http.cjs');

const sdk = peers('@modelcontextprotocol/server');
const { McpServer, ResourceTemplate, completable, createMcpHandler,
  createRequestStateCodec, inputRequired, inputResponse, acceptedContent } = sdk;
const { z } = peers('zod');

const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQAAAAA=';  // a 44-byte header, no samples
const SCHEMA_2020_12 = { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object',
  $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' },
    contactMethod: { type: 'string', enum: ['phone', 'email'] }, phone: { type: 'string' }, email: { type: 'string' } },
  allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
  if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
  then: { required: ['phone'] }, else: { required: ['email'] }, additionalProperties: false };
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const ask = (message, field, type = 'string') => inputRequired.elicit({ message, requestedSchema: {
  type: 'object', properties: { [field]: { type } }, required: [field] } });
const sample = (prompt, maxTokens) => inputRequired.createMessage({
  messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens });
const sampledText = (responses, key) => {
  const view = inputResponse(responses, key);
  return view.kind === 'sampling' ? view.result.content?.text ?? '' : undefined;
};
const caps = (ctx) => ctx.mcpReq.envelope?.['io.modelcontextprotocol/clientCapabilities'] || {};

// requestState crosses the client: every flow mints it sealed, and the SDK refuses a tampered one
// before any handler runs (the tampered-state scenario).
const codec = createRequestStateCodec({ key: 'troupe-conformance-fixture-key-0123456789abcdef' });

// The trigger tools really change the lists (a tool and a prompt come and go), so an aggregator in
// front has a real change to carry, not just a notification to forward. Over HTTP each request gets
// a fresh instance (the factory reads `present`) and the handler's bus tells the listen streams;
// over stdio the one pinned instance is changed in place and the SDK announces the change itself.
const present = { tool: false, prompt: false };
let handler;  // the HTTP handler; none over stdio

function registerContentTools(server) {
  server.registerTool('test_simple_text', { description: 'Simple text.' },
    () => text('This is a simple text response for testing.'));
  server.registerTool('test_image_content', { description: 'An image.' },
    () => ({ content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }));
  server.registerTool('test_audio_content', { description: 'Audio.' },
    () => ({ content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }));
  server.registerTool('test_embedded_resource', { description: 'An embedded resource.' },
    () => ({ content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain',
      text: 'This is an embedded resource content.' } }] }));
  server.registerTool('test_multiple_content_types', { description: 'Text, image and a resource.' },
    () => ({ content: [{ type: 'text', text: 'Multiple content types test:' },
      { type: 'image', data: PNG, mimeType: 'image/png' },
      { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json',
        text: '{"test":"data","value":123}' } }] }));
  server.registerTool('test_error_handling', { description: 'Always fails.' }, () => {
    throw new Error('This tool intentionally returns an error for testing');
  });
  server.registerTool('test_tool_with_progress', { description: 'Reports 0, 50, 100 of 100.' }, async (ctx) => {
    const token = ctx.mcpReq._meta?.progressToken;
    for (const progress of [0, 50, 100]) {
      if (token !== undefined) {
        await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
      }
      if (progress < 100) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    return text('Progress complete.');
  });
}

function registerDiagnosticTools(server) {
  // Needs a sample from the client's model: returned to a client that declared no sampling, the
  // SDK itself answers -32021 naming it (a handler's throw would become an isError result instead).
  server.registerTool('test_missing_capability', { description: 'Needs the sampling capability.' }, (ctx) => {
    const answer = sampledText(ctx.mcpReq.inputResponses, 'sample');
    return answer !== undefined ? text('Success') : inputRequired({ inputRequests: { sample: sample('Say yes', 10) } });
  });
  // The modern stand-in for an elicitation pushed mid-call: an input_required result, never a request.
  server.registerTool('test_streaming_elicitation', { description: 'Asks for a confirmation.' }, (ctx) =>
    acceptedContent(ctx.mcpReq.inputResponses, 'confirm') ? text('Confirmed.')
      : inputRequired({ inputRequests: { confirm: ask('Continue?', 'ok', 'boolean') } }));
  // Logs through the SDK, which must drop it when the request set no logLevel.
  server.registerTool('test_logging_tool', { description: 'Logs one info line.' }, async (ctx) => {
    await ctx.mcpReq.log('info', 'Diagnostic trace logging activated');
    return text('Logging evaluated');
  });
  // Schemas an aggregator must pass on untouched: 2020-12 keywords, and a parameter that travels as
  // an Mcp-Param header the SDK checks against the body before dispatch.
  server.registerTool('json_schema_2020_12_tool', { description: 'Tool with JSON Schema 2020-12 features',
    inputSchema: sdk.fromJsonSchema(SCHEMA_2020_12) }, (args) => text(`Contact: ${args.name}`));
  server.registerTool('test_header_param', { description: 'Echoes a region sent as a header.',
    inputSchema: sdk.fromJsonSchema({ type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Region' } },
      required: ['region'] }) }, (args) => text(`Region: ${args.region}`));
}

function registerInputRequiredTools(server) {
  server.registerTool('test_input_required_result_elicitation', { description: 'Asks for a name.' }, (ctx) => {
    const answer = acceptedContent(ctx.mcpReq.inputResponses, 'user_name');
    return answer?.name !== undefined ? text(`Hello, ${answer.name}!`)
      : inputRequired({ inputRequests: { user_name: ask('What is your name?', 'name') } });
  });
  server.registerTool('test_input_required_result_sampling', { description: 'Asks the model.' }, (ctx) => {
    const answer = sampledText(ctx.mcpReq.inputResponses, 'capital_question');
    return answer !== undefined ? text(`The model said: ${answer}`)
      : inputRequired({ inputRequests: { capital_question: sample('What is the capital of France?', 100) } });
  });
  server.registerTool('test_input_required_result_list_roots', { description: 'Asks for the roots.' }, (ctx) => {
    const view = inputResponse(ctx.mcpReq.inputResponses, 'client_roots');
    return view.kind === 'roots' ? text(`Roots: ${view.roots.map((r) => r.uri).join(', ')}`)
      : inputRequired({ inputRequests: { client_roots: inputRequired.listRoots() } });
  });
  server.registerTool('test_input_required_result_request_state', { description: 'Round-trips state.' }, async (ctx) => {
    const state = ctx.mcpReq.requestState();
    if (state?.flow === 'request-state' && inputResponse(ctx.mcpReq.inputResponses, 'confirm').kind === 'elicit') {
      return text('state-ok: the requestState came back intact');
    }
    return inputRequired({ inputRequests: { confirm: ask('Please confirm', 'ok', 'boolean') },
      requestState: await codec.mint({ flow: 'request-state' }) });
  });
  server.registerTool('test_input_required_result_multiple_inputs', { description: 'Three asks at once.' }, async (ctx) => {
    const got = ctx.mcpReq.inputResponses || {};
    if (ctx.mcpReq.requestState()?.flow === 'multiple' && ['user_name', 'greeting', 'client_roots'].every((k) => k in got)) {
      return text('All inputs received.');
    }
    return inputRequired({ inputRequests: { user_name: ask('What is your name?', 'name'),
      greeting: sample('Generate a greeting', 50), client_roots: inputRequired.listRoots() },
    requestState: await codec.mint({ flow: 'multiple' }) });
  });
  server.registerTool('test_input_required_result_multi_round', { description: 'Two rounds of questions.' }, async (ctx) => {
    const state = ctx.mcpReq.requestState();
    const name = acceptedContent(ctx.mcpReq.inputResponses, 'step1')?.name;
    const color = acceptedContent(ctx.mcpReq.inputResponses, 'step2')?.color;
    if (state?.round === 2 && color !== undefined) return text(`${state.name} likes ${color}.`);
    if (state?.round === 1 && name !== undefined) {
      return inputRequired({ inputRequests: { step2: ask('Step 2: What is your favorite color?', 'color') },
        requestState: await codec.mint({ round: 2, name }) });
    }
    return inputRequired({ inputRequests: { step1: ask('Step 1: What is your name?', 'name') },
      requestState: await codec.mint({ round: 1 }) });
  });
  server.registerTool('test_input_required_result_tampered_state', { description: 'Sealed state.' }, async (ctx) => {
    if (ctx.mcpReq.requestState()?.flow === 'tamper' && ctx.mcpReq.inputResponses?.confirm) {
      return text('integrity-ok: state verified');
    }
    return inputRequired({ inputRequests: { confirm: ask('Please confirm', 'ok', 'boolean') },
      requestState: await codec.mint({ flow: 'tamper' }) });
  });
  server.registerTool('test_input_required_result_capabilities', { description: 'Asks only what the client can answer.' }, (ctx) => {
    const got = ctx.mcpReq.inputResponses || {};
    if (Object.keys(got).length > 0) return text(`capabilities-ok: received ${Object.keys(got).join(',')}`);
    const requests = {};
    if (caps(ctx).elicitation) requests.elicit_input = ask('Elicitation input', 'value');
    if (caps(ctx).sampling) requests.sample_input = sample('Sample request', 50);
    return Object.keys(requests).length ? inputRequired({ inputRequests: requests }) : text('No supported capabilities declared');
  });
}

function registerPrompts(server) {
  server.registerPrompt('test_simple_prompt', { description: 'No arguments.' }, () => ({
    messages: [{ role: 'user', content: { type: 'text', text: 'This is a simple prompt for testing.' } }] }));
  server.registerPrompt('test_prompt_with_arguments', { description: 'Two arguments.', argsSchema: z.object({
    arg1: completable(z.string().describe('First test argument'),
      (value) => ['paris', 'park', 'party', 'test'].filter((v) => v.startsWith(value))),
    arg2: z.string().describe('Second test argument') }) },
  ({ arg1, arg2 }) => ({ messages: [{ role: 'user', content: { type: 'text',
    text: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` } }] }));
  server.registerPrompt('test_prompt_with_embedded_resource', { description: 'Embeds a resource.',
    argsSchema: z.object({ resourceUri: z.string() }) }, ({ resourceUri }) => ({ messages: [
    { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain',
      text: 'Embedded resource content for testing.' } } },
    { role: 'user', content: { type: 'text', text: 'Please process the embedded resource above.' } }] }));
  server.registerPrompt('test_prompt_with_image', { description: 'An image.' }, () => ({ messages: [
    { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
    { role: 'user', content: { type: 'text', text: 'Please analyze the image above.' } }] }));
  server.registerPrompt('test_input_required_result_prompt', { description: 'Asks for context first.' }, (ctx) => {
    const context = acceptedContent(ctx.mcpReq.inputResponses, 'user_context')?.context;
    return context !== undefined
      ? { messages: [{ role: 'user', content: { type: 'text', text: `Use this context: ${context}` } }] }
      : inputRequired({ inputRequests: { user_context: ask('What context should the prompt use?', 'context') } });
  });
}

function addDynamic(server, kind) {
  return kind === 'tool'
    ? server.registerTool('test_dynamic_tool', { description: 'Comes and goes.' }, () => text('here'))
    : server.registerPrompt('test_dynamic_prompt', { description: 'Comes and goes.' }, () => ({
      messages: [{ role: 'user', content: { type: 'text', text: 'here' } }] }));
}

function registerDynamic(server) {
  const live = { tool: present.tool ? addDynamic(server, 'tool') : null,
    prompt: present.prompt ? addDynamic(server, 'prompt') : null };
  const toggle = (kind) => {
    present[kind] = !present[kind];
    if (handler) {
      handler.notify[kind === 'tool' ? 'toolsChanged' : 'promptsChanged']();
    } else if (live[kind]) {
      live[kind].remove();
      live[kind] = null;
    } else {
      live[kind] = addDynamic(server, kind);
    }
    return text('Mutation triggered');
  };
  server.registerTool('test_trigger_tool_change', { description: 'Adds or removes test_dynamic_tool.' },
    () => toggle('tool'));
  server.registerTool('test_trigger_prompt_change', { description: 'Adds or removes test_dynamic_prompt.' },
    () => toggle('prompt'));
}

function registerResources(server) {
  server.registerResource('static-text', 'test://static-text', { description: 'Static text.', mimeType: 'text/plain' },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: 'This is the content of the static text resource.' }] }));
  server.registerResource('static-binary', 'test://static-binary', { description: 'A PNG.', mimeType: 'image/png' },
    (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }));
  server.registerResource('template', new ResourceTemplate('test://template/{id}/data', { list: undefined }),
    { description: 'Data by id.', mimeType: 'application/json' },
    (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'application/json',
      text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] }));
}

function factory() {
  const hint = { ttlMs: 60000, cacheScope: 'public' };
  const server = new McpServer({ name: 'ts-conformance', version: '1.0.0' }, {
    capabilities: { tools: { listChanged: true }, prompts: { listChanged: true }, resources: {}, logging: {} },
    cacheHints: { 'tools/list': hint, 'prompts/list': hint, 'resources/list': hint, 'resources/templates/list': hint },
    requestState: { verify: codec.verify } });
  registerContentTools(server);
  registerDiagnosticTools(server);
  registerInputRequiredTools(server);
  registerPrompts(server);
  registerResources(server);
  registerDynamic(server);
  return server;
}

if (process.argv[2] === 'stdio') {
  peers('@modelcontextprotocol/server/stdio').serveStdio(factory, { legacy: 'reject' });
} else {
  handler = createMcpHandler(factory, { legacy: 'reject' });
  const hosts = sdk.localhostAllowedHostnames();
  const origins = sdk.localhostAllowedOrigins();
  serve('ts_conformance', Number(process.argv[2] || 0), (request) =>
    // DNS-rebinding protection is the server's job (the dns-rebinding-protection scenario).
    sdk.hostHeaderValidationResponse(request, hosts) || sdk.originValidationResponse(request, origins)
      || handler.fetch(request));
}
