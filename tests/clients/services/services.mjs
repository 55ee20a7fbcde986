// Runs a kernel through a Jupyter server with @jupyterlab/services, as JupyterLab does: KernelManager
// starts it over REST, the KernelConnection talks to it over the server's WebSocket, and the kernel is
// shut down through the server again.  Prints one JSON line on stdout for
// tests/clients/test_jupyterlab_services.py to check.
//
// Usage: node services.mjs <config.json>
//   config: { baseUrl, token, kernelName, codes: [..], timeoutMs, debug }
//   debug: when true, also one breakpoint round trip through KernelConnection.requestDebug, as JupyterLab's
//   debugger makes it: initialize, attach, debugInfo, dumpCell, setBreakpoints, configurationDone; a cell
//   that calls a function of an earlier cell stops (debug_event "stopped"); stackTrace, continue; the cell
//   finishes; disconnect.
// Exit code 0 when every step ran (whatever the kernel answered); 2 otherwise (the JSON then has "error").

import { readFileSync } from 'node:fs';
import WebSocket from 'ws';
import services from '@jupyterlab/services';

const { KernelManager, KernelAPI, ServerConnection } = services;
const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const started = Date.now();
const result = { ok: false, steps: [], statuses: [], connectionStatuses: [], executions: [] };

function step(name) {
  result.steps.push({ name, ms: Date.now() - started });
}

function finish(code) {
  result.elapsedMs = Date.now() - started;
  process.stdout.write(JSON.stringify(result) + '\n');
  process.exit(code);
}

const timer = setTimeout(() => {
  result.error = 'timed out after ' + cfg.timeoutMs + ' ms (last step: ' + JSON.stringify(result.steps.at(-1)) + ')';
  finish(2);
}, cfg.timeoutMs ?? 40000);

// One DAP request through the kernel connection; resolves with the DAP response (the debug_reply content).
let seq = 0;
async function dap(kernel, command, args) {
  const future = kernel.requestDebug({ type: 'request', seq: ++seq, command, arguments: args || {} });
  const reply = await future.done;
  return reply.content;
}

async function debugRoundTrip(kernel) {
  const out = { events: [] };
  let onStopped;
  const stopped = new Promise((resolve) => (onStopped = resolve));
  kernel.iopubMessage.connect((_, msg) => {
    if (msg.header.msg_type !== 'debug_event') return;
    out.events.push(msg.content.event);
    if (msg.content.event === 'stopped') onStopped(msg.content);
  });
  const init = await dap(kernel, 'initialize', {
    clientID: 'jupyterlab', clientName: 'JupyterLab', adapterID: 'python', pathFormat: 'path',
    linesStartAt1: true, columnsStartAt1: true, supportsVariableType: true, supportsVariablePaging: true,
    supportsRunInTerminalRequest: true, locale: 'en',
  });
  out.initialize = init.success;
  out.attach = (await dap(kernel, 'attach')).success;
  const info = await dap(kernel, 'debugInfo');
  out.hashMethod = info.body.hashMethod;
  const code = 'def f(a, b):\n    c = a + b\n    return c\n';
  await kernel.requestExecute({ code }).done;
  const dumped = await dap(kernel, 'dumpCell', { code });
  out.sourcePath = dumped.body.sourcePath;
  out.prefixMatches = dumped.body.sourcePath.startsWith(info.body.tmpFilePrefix);
  const bps = await dap(kernel, 'setBreakpoints', {
    breakpoints: [{ line: 2 }], source: { path: dumped.body.sourcePath }, sourceModified: false,
  });
  out.verified = bps.body.breakpoints.map((b) => b.verified);
  out.configurationDone = (await dap(kernel, 'configurationDone')).success;
  const future = kernel.requestExecute({ code: 'print(f(2, 3))' });
  const iopub = [];
  future.onIOPub = (msg) => iopub.push(msg);
  const ev = await stopped;
  out.stoppedReason = ev.body.reason;
  const stack = await dap(kernel, 'stackTrace', { threadId: ev.body.threadId });
  out.topFrame = { name: stack.body.stackFrames[0].name, line: stack.body.stackFrames[0].line };
  out.continued = (await dap(kernel, 'continue', { threadId: ev.body.threadId })).success;
  const reply = await future.done;
  out.cellStatus = reply.content.status;
  out.cellOutput = iopub.filter((m) => m.header.msg_type === 'stream').map((m) => m.content.text).join('');
  out.disconnect = (await dap(kernel, 'disconnect', { restart: false, terminateDebuggee: false })).success;
  return out;
}

let manager;
try {
  const serverSettings = ServerConnection.makeSettings({
    baseUrl: cfg.baseUrl,
    wsUrl: cfg.baseUrl.replace(/^http/, 'ws'),
    token: cfg.token,
    appendToken: true, // the token in the WebSocket URL too (a WebSocket in Node sends no cookie)
    WebSocket,
  });
  manager = new KernelManager({ serverSettings });
  await manager.ready;
  step('manager ready');

  const kernel = await manager.startNew({ name: cfg.kernelName });
  result.kernelId = kernel.id;
  result.kernelName = kernel.name;
  kernel.statusChanged.connect((_, s) => result.statuses.push(s));
  kernel.connectionStatusChanged.connect((_, s) => result.connectionStatuses.push(s));
  step('started');

  // The connection asks for kernel_info as soon as its WebSocket is open.
  const info = await kernel.info;
  result.info = {
    implementation: info.implementation,
    protocol_version: info.protocol_version,
    language: info.language_info && info.language_info.name,
  };
  result.connectionStatus = kernel.connectionStatus;
  step('kernel_info');

  for (const code of cfg.codes) {
    const iopub = [];
    const future = kernel.requestExecute({ code, silent: false, store_history: true });
    future.onIOPub = (msg) => iopub.push({ msg_type: msg.header.msg_type, content: msg.content });
    // done: the execute_reply has come and the kernel has gone idle for this request
    const reply = await future.done;
    result.executions.push({
      code,
      reply: { status: reply.content.status, execution_count: reply.content.execution_count },
      iopub,
    });
    step('executed ' + JSON.stringify(code));
  }

  if (cfg.restart) {
    // A restart through the REST API, then one cell: the kernel's pid says it is a new process.
    const pidOf = async () => {
      const future = kernel.requestExecute({ code: 'import os; print(os.getpid())' });
      let out = '';
      future.onIOPub = (msg) => { if (msg.header.msg_type === 'stream') out += msg.content.text; };
      const reply = await future.done;
      return { status: reply.content.status, pid: out.trim() };
    };
    const before = await pidOf();
    await kernel.restart();
    step('restarted');
    const after = await pidOf();
    result.afterRestart = { status: after.status, pidChanged: before.pid !== after.pid && after.pid !== '' };
  }

  if (cfg.debug) {
    result.debug = await debugRoundTrip(kernel);
    step('debugged');
  }

  await kernel.shutdown();
  step('shut down');
  result.statusAfterShutdown = kernel.status;
  result.runningAfterShutdown = (await KernelAPI.listRunning(serverSettings)).map((m) => m.id);
  result.ok = true;
} catch (e) {
  result.error = String((e && e.stack) || e);
}
clearTimeout(timer);
try {
  if (manager) manager.dispose();
} catch (e) {
  result.disposeError = String(e);
}
finish(result.ok ? 0 : 2);
