// Drives a notebook in the JupyterLab 4 user interface (JupyterLab itself, and Notebook 7, which is built on
// it) in Debian's headless Chromium with playwright-core: opens the notebook, runs its cells one by one with
// Shift+Enter, answers the input() prompt by typing into the stdin box, optionally types code into an empty
// cell and presses Tab to complete it, and prints (one JSON line on stdout) what the page shows.  The
// assertions are made by tests/clients/test_notebook_browser.py (Notebook 7) and
// tests/clients/test_jupyterlab_browser.py.
//
// Usage: node lab.mjs <config.json>
//   config: { url, chromium, userDataDir, screenshot, answer, timeoutMs,
//             completions: [{ name, code }, ...] (typed into an empty cell, then Tab) }
// The server must run with expose_app_in_browser (window.jupyterapp): the notebook panel, its kernel and its
// cells' models are read from the app, what the cells show from the DOM.  The kernel messages of the
// page's websocket (either protocol: JSON text frames, or jupyter_server's binary v1.kernel.websocket) are
// logged with their times, so that a completion that shows nothing can be told apart from one the kernel
// answered too late.
// Exit code 0 when the page was read (whatever it shows); 2 when the page could not be driven (the JSON
// then has "error").

import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const timeoutMs = cfg.timeoutMs ?? 45000;
const started = Date.now();
const steps = [];
const consoleErrors = [];
const messages = []; // kernel messages on the page's websockets: { ms, ws, dir, channel, type, msgId, parent, ... }

function step(name) {
  steps.push({ name, ms: Date.now() - started });
}

function left() {
  return Math.max(1000, timeoutMs - (Date.now() - started));
}

// A kernel message from a websocket frame: JSON text (the default protocol), or jupyter_server's
// v1.kernel.websocket.jupyter.org binary framing: n (uint64 LE), n offsets (uint64 LE), then channel,
// header, parent_header, metadata, content and buffers between them.
function decodeFrame(payload) {
  if (typeof payload === 'string') return JSON.parse(payload);
  const buf = Buffer.from(payload);
  const n = Number(buf.readBigUInt64LE(0));
  const offsets = [];
  for (let i = 0; i < n; i++) offsets.push(Number(buf.readBigUInt64LE(8 * (i + 1))));
  const part = (i) => buf.subarray(offsets[i], i + 1 < n ? offsets[i + 1] : buf.length).toString('utf8');
  return {
    channel: part(0),
    header: JSON.parse(part(1)),
    parent_header: JSON.parse(part(2)),
    metadata: JSON.parse(part(3)),
    content: JSON.parse(part(4)),
  };
}

function logFrame(ws, dir, payload) {
  let msg;
  try {
    msg = decodeFrame(payload);
  } catch {
    return;
  }
  if (!msg || !msg.header || messages.length >= 5000) return;
  const type = msg.header.msg_type;
  const entry = {
    ms: Date.now() - started,
    ws,
    dir,
    channel: msg.channel,
    type,
    msgId: msg.header.msg_id,
    parent: (msg.parent_header || {}).msg_id,
  };
  const c = msg.content || {};
  if (type === 'status') entry.state = c.execution_state;
  if (type === 'complete_request') Object.assign(entry, { code: c.code, cursorPos: c.cursor_pos });
  if (type === 'complete_reply') {
    const types = (msg.content.metadata || {})._jupyter_types_experimental;
    Object.assign(entry, {
      status: c.status,
      matches: (c.matches || []).slice(0, 20),
      nMatches: (c.matches || []).length,
      cursorStart: c.cursor_start,
      cursorEnd: c.cursor_end,
      types: Array.isArray(types) ? types.slice(0, 5) : types,
    });
  }
  if (type === 'execute_request') entry.code = String(c.code).slice(0, 60);
  messages.push(entry);
}

// Page-side helpers, installed as window.__pyc before the page's scripts run (functions passed to
// page.evaluate are sent as their source, so they cannot call functions of this file).
function pageHelpers() {
  const panel = () => {
    const app = window.jupyterapp;
    if (!app || !app.shell) return null;
    return [...app.shell.widgets('main')].find((w) => w.content && w.sessionContext && w.content.widgets) || null;
  };
  const kernelOf = (p) => (p.sessionContext.session ? p.sessionContext.session.kernel : null);

  // The notebook panel of the page and its kernel, from the app's model.
  const panelState = () => {
    const p = panel();
    if (!p) return null;
    const kernel = kernelOf(p);
    return {
      kernelName: kernel ? kernel.name : null,
      status: kernel ? kernel.status : null,
      connection: kernel ? kernel.connectionStatus : null,
      nCells: p.content.widgets.length,
    };
  };

  // State of cell i: 'input' when its stdin box shows, 'done' when its prompt is a number and the kernel
  // is idle, else false.
  const cellState = (i) => {
    const p = panel();
    const cell = p.content.widgets[i];
    if (cell.node.querySelector('input.jp-Stdin-input')) return 'input';
    const kernel = kernelOf(p);
    const prompt = cell.node.querySelector('.jp-InputPrompt');
    const done = prompt && /\[\d+\]/.test(prompt.innerText);
    return done && kernel && kernel.status === 'idle' ? 'done' : false;
  };

  const source = (i) => panel().content.widgets[i].model.sharedModel.getSource();

  // How a slider or progress bar widget is drawn: the size of its track (bar) and handle (filled part),
  // and where the handle's centre (the fill's end) is along the track, from 0 to 1 (at: as drawn;
  // modelAt: as the view set it).
  const widgetGeometry = (w) => {
    const box = (sel) => {
      const e = w.querySelector(sel);
      if (!e) return null;
      const r = e.getBoundingClientRect();
      return { left: r.left, width: r.width, height: r.height };
    };
    const track = box('.slider') || box('.progress');
    const knob = box('.noUi-handle, .ui-slider-handle') || box('.progress-bar');
    // where the view put it, from its attributes and inline styles (there without the stylesheet too): a
    // noUiSlider handle's aria-valuenow (ipywidgets 8), a jQuery UI handle's left (6), the fill's width
    const handle = w.querySelector('.noUi-handle, .ui-slider-handle');
    const fill = w.querySelector('.progress-bar');
    let modelAt = null;
    if (handle && handle.hasAttribute('aria-valuenow')) {
      const [v, lo, hi] = ['now', 'min', 'max'].map((k) => parseFloat(handle.getAttribute('aria-value' + k)));
      modelAt = (v - lo) / (hi - lo);
    } else if (handle && handle.style.left.endsWith('%')) {
      modelAt = parseFloat(handle.style.left) / 100;
    } else if (fill && fill.style.width.endsWith('%')) {
      modelAt = parseFloat(fill.style.width) / 100;
    }
    const g = { track, knob, at: null, modelAt };
    if (track && knob && track.width > 0) {
      const end = w.querySelector('.progress-bar') ? knob.left + knob.width : knob.left + knob.width / 2;
      g.at = Math.round((100 * (end - track.left)) / track.width) / 100;
    }
    return g;
  };

  // Where an element is: the model id of its cell and the index of its output there.
  const locate = (el) => {
    const child = el.closest('.jp-OutputArea-child');
    const cell = panel().content.widgets.find((c) => c.node.contains(el));
    if (!child || !cell) return null;
    return { id: cell.model.id, output: [...cell.node.querySelectorAll('.jp-OutputArea-child')].indexOf(child) };
  };

  // The completer's list as the page shows it: the items' labels, or null when it is hidden.
  const completerItems = () => {
    const box = document.querySelector('.jp-Completer');
    // (a HoverBox is position: fixed, so it has no offsetParent)
    if (!box || box.classList.contains('lm-mod-hidden') || getComputedStyle(box).display === 'none') return null;
    return [...box.querySelectorAll('.jp-Completer-item')].map((li) => {
      const m = li.querySelector('.jp-Completer-match');
      return (m || li).innerText.trim();
    });
  };

  // What each code cell shows, read from the DOM (outputs) and the cell models (source, output types).
  const readCells = () => {
    const cells = [];
    for (const cell of panel().content.widgets) {
      if (cell.model.type !== 'code') continue;
      const src = cell.model.sharedModel.getSource();
      const outputModels = cell.model.outputs;
      // Shift+Enter on the last cell appends an empty one
      if (!src.trim() && outputModels.length === 0) continue;
      const node = cell.node;
      const prompt = node.querySelector('.jp-InputPrompt');
      const areas = [];
      [...node.querySelectorAll('.jp-OutputArea-child')].forEach((child, j) => {
        const out = child.querySelector('.jp-OutputArea-output');
        // the output's type from the model (an error and a stderr stream show the same mimetype)
        const model = j < outputModels.length ? outputModels.get(j) : null;
        const mime = out ? out.getAttribute('data-mime-type') || '' : '';
        areas.push({
          classes: out ? out.className : '',
          mime,
          type: model ? model.type : '',
          error: !!model && model.type === 'error',
          html: mime === 'text/html',
          text: (out || child).innerText,
          tables: [...child.querySelectorAll('table')].map((t) => ({
            headers: [...t.querySelectorAll('th')].map((th) => th.innerText.trim()),
            cells: [...t.querySelectorAll('td')].map((td) => td.innerText.trim()),
          })),
          imgs: [...child.querySelectorAll('img')].map((img) => ({
            src: (img.getAttribute('src') || '').slice(0, 40),
            complete: img.complete,
            naturalWidth: img.naturalWidth,
            naturalHeight: img.naturalHeight,
          })),
          plotly: !!child.querySelector('.js-plotly-plot svg.main-svg'),
          math: !!child.querySelector('.MathJax, .MathJax_Display, .MathJax_SVG, mjx-container'),
          rawInput: !!child.querySelector('input.jp-Stdin-input'),
        });
      });
      // ipywidgets 8 draws its views in the output area: their kind (from the class names), their text, the
      // value they show and how they are drawn
      const views = node.querySelectorAll('.jp-OutputArea .widget-hslider, .jp-OutputArea .widget-hprogress');
      const widgets = [...views].map(
        (w) => ({
          classes: w.className,
          text: w.innerText.trim(),
          readout: ((w.querySelector('.widget-readout') || {}).innerText || '').trim(),
          boxText: (w.closest('.widget-hbox, .widget-box') || w).innerText.trim(),
          drawn: widgetGeometry(w),
        }),
      );
      cells.push({
        id: cell.model.id,
        widgets,
        source: src,
        prompt: prompt ? prompt.innerText.trim() : '',
        executionCount: cell.model.executionCount,
        outputs: areas,
      });
    }
    return cells;
  };

  window.__pyc = { panel, panelState, cellState, source, locate, completerItems, readCells };
}

// The iframes of the page that show a drawn plotly graph (plotly's "iframe" renderer): where each is.
async function plotlyFrames(page) {
  const found = [];
  for (const frame of page.frames()) {
    if (frame === page.mainFrame()) continue;
    try {
      if (!(await frame.$('.js-plotly-plot svg.main-svg'))) continue;
      const el = await frame.frameElement();
      found.push(await el.evaluate((el) => window.__pyc.locate(el)));
    } catch {
      // a frame that went away
    }
  }
  return found;
}

let context;
const result = { ok: false, steps, consoleErrors, messages };
try {
  context = await chromium.launchPersistentContext(cfg.userDataDir, {
    executablePath: cfg.chromium,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--no-first-run',
      '--disable-sync',
    ],
    viewport: { width: 1200, height: 900 },
    timeout: 20000,
  });
  step('launched');
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20000);
  // the page's errors, each once (with where it was logged), at most 30
  const noteError = (text) => {
    if (consoleErrors.length < 30 && !consoleErrors.includes(text)) consoleErrors.push(text);
  };
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const where = msg.location();
    const text = msg.text().slice(0, 300) + (where && where.url ? ' at ' + where.url.replace(/^.*\//, '') : '');
    // an Error logged as an object has its stack
    const arg = msg.args().find((a) => a.toString().includes('Error'));
    if (!arg) return noteError(text);
    arg
      .evaluate((e) => (e && e.stack ? String(e.stack) : ''))
      .then((stack) => noteError(stack ? text + '\n' + stack.slice(0, 1500) : text))
      .catch(() => noteError(text));
  });
  page.on('pageerror', (err) => noteError('pageerror: ' + String(err.stack || err).slice(0, 600)));
  // (the page opens more than one websocket to the kernel; each message is logged with its socket's number)
  let sockets = 0;
  page.on('websocket', (ws) => {
    if (!/\/api\/kernels\//.test(ws.url())) return;
    const n = sockets++;
    ws.on('framesent', (f) => logFrame(n, 'sent', f.payload));
    ws.on('framereceived', (f) => logFrame(n, 'received', f.payload));
  });

  await context.addInitScript({ content: '(' + pageHelpers.toString() + ')();' });
  await page.goto(cfg.url, { waitUntil: 'load' });
  step('loaded');
  // The notebook is open, its kernel up, connected and idle.
  await page.waitForFunction(
    () => {
      const s = window.__pyc.panelState();
      return s && s.nCells > 0 && s.connection === 'connected' && s.status === 'idle';
    },
    null,
    { timeout: Math.min(left(), 40000), polling: 100 },
  );
  step('kernel idle');
  const state = await page.evaluate(() => window.__pyc.panelState());
  result.kernelName = state.kernelName;

  // Run the cells one by one as a person would: click into the cell, Shift+Enter, and wait until it has
  // finished before the next one (so that a cell that fails does not abort the ones after it).  The cell
  // that asks for input() gets its answer typed into the stdin box.
  const nCells = state.nCells;
  const cellLocator = (i) => page.locator('.jp-Notebook .jp-Cell').nth(i);
  const waitCell = (i, ...states) =>
    page.waitForFunction(
      ([i, states]) => {
        const s = window.__pyc.cellState(i);
        return states.includes(s) ? s : false;
      },
      [i, states],
      { timeout: Math.min(left(), 20000), polling: 50 },
    );
  // Click into cell i's editor.  Outputs that grow above it (an iframe loading) can move it under the
  // pointer: the click is checked, and made again, until the notebook's active cell is i in edit mode.
  const focusCell = async (i) => {
    for (let attempt = 0; ; attempt++) {
      await cellLocator(i).locator('.cm-content').click();
      const ok = await page.evaluate((i) => {
        const p = window.__pyc.panel();
        return p.content.activeCellIndex === i && p.content.mode === 'edit' && p.content.activeCell.editor.hasFocus();
      }, i);
      if (ok) return;
      if (attempt === 3) throw new Error('cell ' + i + ' does not take the focus');
      await page.waitForTimeout(300);
    }
  };
  result.runs = [];
  for (let i = 0; i < nCells; i++) {
    const run = { index: i };
    result.runs.push(run);
    try {
      await focusCell(i);
      await page.keyboard.press('Shift+Enter');
      const st = await waitCell(i, 'done', 'input');
      if ((await st.jsonValue()) === 'input') {
        const box = cellLocator(i).locator('input.jp-Stdin-input');
        run.inputPrompt = await cellLocator(i).locator('.jp-Stdin-prompt').first().innerText();
        result.inputPrompt = run.inputPrompt;
        await box.click();
        await box.pressSequentially(cfg.answer, { delay: 10 });
        await box.press('Enter');
        step('answered input');
        await waitCell(i, 'done');
      }
      run.done = true;
    } catch (e) {
      run.error = String(e).split('\n')[0];
    }
    step('cell ' + i);
  }

  // Let images finish decoding, and MathJax and plotly finish drawing, before the page is read (and
  // before the empty cell at the end is used for completions).
  if (cfg.waitForRich) {
    await page
      .waitForFunction(
        () =>
          !!document.querySelector('.MathJax, .MathJax_Display, .MathJax_SVG, mjx-container') &&
          !!document.querySelector('.js-plotly-plot svg.main-svg, .jp-OutputArea iframe'),
        null,
        { timeout: 10000 },
      )
      .catch(() => {});
    // plotly.js (4.6 MB, inline in each iframe's page) is parsed and drawn in the iframe: on a loaded
    // machine that has taken longer than 10 s, so the wait is bounded by 30 s
    const waitStarted = Date.now();
    const deadline = waitStarted + 30000;
    while (!(await plotlyFrames(page)).length && (await page.$('.jp-OutputArea iframe')) && Date.now() < deadline)
      await page.waitForTimeout(200);
    result.plotlyWaitMs = Date.now() - waitStarted;
    // what each iframe holds when no graph was drawn, so that a failure says why
    result.frames = [];
    for (const frame of page.frames()) {
      if (frame === page.mainFrame()) continue;
      result.frames.push(
        await frame
          .evaluate(() => ({
            url: location.href.slice(-60),
            readyState: document.readyState,
            plotlyLoaded: typeof window.Plotly !== 'undefined',
            plots: document.querySelectorAll('.js-plotly-plot').length,
            bytes: document.documentElement.outerHTML.length,
          }))
          .catch((e) => ({ error: String(e).split('\n')[0] })),
      );
    }
  }
  await page
    .waitForFunction(() => [...document.querySelectorAll('.jp-OutputArea img')].every((i) => i.complete), null, {
      timeout: 5000,
    })
    .catch(() => {});

  result.cells = await page.evaluate(() => window.__pyc.readCells());
  // plotly graphs drawn in iframes: jupyter_server serves files with "Content-Security-Policy: sandbox
  // allow-scripts", so the page cannot look into them, but playwright can
  for (const where of await plotlyFrames(page)) {
    const c = result.cells.find((c) => where && c.id === where.id);
    if (c && c.outputs[where.output]) c.outputs[where.output].plotly = true;
  }

  // Completion as a user does it: in the empty cell at the end, type the code, press Tab, and look at what
  // the page shows within a few seconds (the completer's list, or the cell's text when the only match was
  // inserted).  The complete_request the Tab sent and its reply are taken from the websocket log.
  result.completions = [];
  for (const c of cfg.completions ?? []) {
    const entry = { name: c.name, code: c.code };
    result.completions.push(entry);
    try {
      const last = (await page.evaluate(() => window.__pyc.panelState())).nCells - 1;
      const editor = cellLocator(last).locator('.cm-content');
      await focusCell(last);
      await page.keyboard.press('Control+a');
      await page.keyboard.press('Backspace');
      await editor.pressSequentially(c.code, { delay: 40 });
      await page.waitForTimeout(200);
      entry.typed = await page.evaluate((last) => window.__pyc.source(last), last);
      const before = messages.length;
      const t0 = Date.now();
      entry.tabAtMs = t0 - started;
      await page.keyboard.press('Tab');
      // what shows: the list, or the text changed (the only match inserted, or a Tab's indentation)
      const shown = await page
        .waitForFunction(
          ([typed, last]) => {
            const items = window.__pyc.completerItems();
            if (items && items.length) return { items };
            const text = window.__pyc.source(last);
            return text !== typed ? { text } : false;
          },
          [entry.typed, last],
          { timeout: c.waitMs ?? 5000, polling: 20 },
        )
        .then((h) => h.jsonValue())
        .catch(() => null);
      entry.shownAfterMs = shown ? Date.now() - t0 : null;
      // the kernel's reply may come after the page gave up on it: give it time to be in the log
      await page.waitForTimeout(shown ? 300 : 1500);
      entry.items =
        shown && shown.items ? shown.items : (await page.evaluate(() => window.__pyc.completerItems())) || [];
      entry.text = await page.evaluate((last) => window.__pyc.source(last), last);
      entry.requests = messages
        .slice(before)
        .filter((m) => m.type === 'complete_request')
        .map((m) => {
          const reply = messages.find((r) => r.type === 'complete_reply' && r.parent === m.msgId && r.ws === m.ws);
          return {
            code: m.code,
            cursorPos: m.cursorPos,
            sentAfterTabMs: m.ms - (t0 - started),
            replyMs: reply ? reply.ms - m.ms : null,
            reply: reply || null,
          };
        });
      await page.keyboard.press('Escape');
      await page.waitForTimeout(100);
    } catch (e) {
      entry.error = String(e).split('\n')[0];
    }
    step('completion ' + c.name);
  }

  // The notebook scrolls inside its panel: a viewport as tall as the notebook lets the screenshot show every
  // cell.
  const height = await page.evaluate(() => {
    const scrollers = [...document.querySelectorAll('.jp-WindowedPanel-outer, .jp-Notebook')];
    return Math.max(0, ...scrollers.map((e) => e.scrollHeight - e.clientHeight)) + window.innerHeight;
  });
  await page.setViewportSize({ width: 1200, height: Math.min(Math.max(height, 900), 12000) });
  await page.waitForTimeout(300);
  await page.screenshot({ path: cfg.screenshot, fullPage: true });
  step('screenshot');
  result.ok = true;
} catch (e) {
  result.error = String(e.stack || e);
}
try {
  if (context) await context.close();
} catch (e) {
  result.closeError = String(e).split('\n')[0];
}
result.elapsedMs = Date.now() - started;
process.stdout.write(JSON.stringify(result) + '\n');
process.exit(result.ok ? 0 : 2);
