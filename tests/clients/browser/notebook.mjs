// Drives the classic Jupyter Notebook 6 page in Debian's headless Chromium with playwright-core:
// opens a notebook, runs its cells one by one with Shift+Enter, answers the input() prompt by typing into the
// input box, and prints (one JSON line on stdout) what the page shows for each cell.  The assertions are
// made by tests/clients/test_notebook_browser.py (lab.mjs drives Notebook 7 and JupyterLab).
//
// Usage: node notebook.mjs <config.json>
//   config: { url, chromium, userDataDir, screenshot, answer, timeoutMs, reconnectAfter: [cell index, ...] }
// Exit code 0 when the page was read (whatever it shows); 2 when the page could not be driven (the JSON
// then has "error").

import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const timeoutMs = cfg.timeoutMs ?? 45000;
const started = Date.now();
const steps = [];
const consoleErrors = [];

function step(name) {
  steps.push({ name, ms: Date.now() - started });
}

function left() {
  return Math.max(1000, timeoutMs - (Date.now() - started));
}

// What each code cell shows, read from the DOM (not from the notebook model).
function readCells() {
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

  const cells = [];
  for (const cell of document.querySelectorAll('#notebook-container .cell')) {
    if (!cell.classList.contains('code_cell')) continue;
    const input = cell.querySelector('.input_area');
    const source = (input ? input.innerText : '').replace(/\u200b/g, ''); // CodeMirror's empty line
    // Shift+Enter on the last cell appends an empty one
    if (!source.trim() && !cell.querySelector('.output_area')) continue;
    const prompt = cell.querySelector('.input_prompt');
    const areas = [];
    for (const area of cell.querySelectorAll('.output_area')) {
      const sub = area.querySelector('.output_subarea');
      const tables = [...area.querySelectorAll('table')].map((t) => ({
        headers: [...t.querySelectorAll('th')].map((th) => th.innerText.trim()),
        cells: [...t.querySelectorAll('td')].map((td) => td.innerText.trim()),
      }));
      const imgs = [...area.querySelectorAll('img')].map((img) => ({
        src: (img.getAttribute('src') || '').slice(0, 40),
        complete: img.complete,
        naturalWidth: img.naturalWidth,
        naturalHeight: img.naturalHeight,
      }));
      const classes = sub ? sub.className : '';
      areas.push({
        classes,
        error: /\boutput_error\b/.test(classes),
        html: /\boutput_html\b/.test(classes),
        text: area.innerText,
        tables,
        imgs,
        plotly: !!area.querySelector('.js-plotly-plot svg.main-svg'),
        math: !!area.querySelector('.MathJax, .MathJax_Display, .MathJax_SVG, mjx-container'),
        rawInput: !!area.querySelector('input.raw_input'),
      });
    }
    // ipywidgets 6 shows its views in the cell's widget area, below the outputs, ipywidgets 8 in the output
    // area: their kind (from the class names), their text and the value they show
    const widgets = [
      ...cell.querySelectorAll(
        '.widget-area .widget-hslider, .widget-area .widget-hprogress, ' +
          '.output_area .widget-hslider, .output_area .widget-hprogress',
      ),
    ].map(
      (w) => ({
        classes: w.className,
        text: w.innerText.trim(),
        readout: ((w.querySelector('.widget-readout') || {}).innerText || '').trim(),
        boxText: (w.closest('.widget-hbox, .widget-box') || w).innerText.trim(),
        drawn: widgetGeometry(w),
      }),
    );
    cells.push({
      widgets,
      source,
      prompt: prompt ? prompt.innerText.trim() : '',
      running: cell.classList.contains('running'),
      outputs: areas,
    });
  }
  return cells;
}

let context;
const result = { ok: false, steps, consoleErrors };
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
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(msg.text().slice(0, 300));
  });
  page.on('pageerror', (err) => consoleErrors.push('pageerror: ' + String(err).slice(0, 300)));
  // The kernel's messages as the page's websocket carried them (channel, type, state, parent), so that a
  // cell that shows nothing can be told apart: a message the page never got, or one it did not draw.
  result.ws = [];
  page.on('websocket', (ws) => {
    const log = (dir) => (frame) => {
      if (result.ws.length >= 5000 || typeof frame.payload !== 'string') return;
      try {
        const m = JSON.parse(frame.payload);
        result.ws.push({
          ms: Date.now() - started,
          dir,
          channel: m.channel,
          type: m.msg_type || (m.header || {}).msg_type,
          id: ((m.header || {}).msg_id || '').slice(-8),
          parent: ((m.parent_header || {}).msg_id || '').slice(-8),
          state: (m.content || {}).execution_state,
          bytes: frame.payload.length,
          html: (((m.content || {}).data || {})['text/html'] || '').length || undefined,
          code: dir === 'sent' ? ((m.content || {}).code || '').slice(0, 30) : undefined,
        });
      } catch {
        // not a JSON message
      }
    };
    ws.on('framesent', log('sent'));
    ws.on('framereceived', log('received'));
    ws.on('close', () => result.ws.push({ ms: Date.now() - started, dir: 'closed', url: ws.url().slice(-60) }));
  });

  await page.goto(cfg.url, { waitUntil: 'load' });
  step('loaded');
  // The kernel is up and its websocket connected; the kernel indicator is idle.
  await page.waitForFunction(
    () =>
      window.Jupyter &&
      Jupyter.notebook &&
      Jupyter.notebook._fully_loaded &&
      Jupyter.notebook.kernel &&
      Jupyter.notebook.kernel.is_connected() &&
      document.querySelector('#kernel_indicator_icon.kernel_idle_icon') !== null,
    null,
    { timeout: Math.min(left(), 30000) },
  );
  step('kernel idle');
  result.kernelName = await page.evaluate(() => Jupyter.notebook.kernel.name);

  // Run the cells one by one as a person would: click into the cell, Shift+Enter, and wait until it has
  // finished before the next one (so that a cell that fails does not abort the ones after it).  The cell
  // that asks for input() gets its answer typed into the input box.
  const nCells = await page.evaluate(() => Jupyter.notebook.ncells());
  result.runs = [];
  for (let i = 0; i < nCells; i++) {
    const run = { index: i };
    result.runs.push(run);
    try {
      const editor = page.locator('#notebook-container .cell').nth(i).locator('.CodeMirror');
      // The key press is checked to have run the cell (its prompt is '*' or a number, or it asks for
      // input): a press that went elsewhere (a frame that was still loading and moved the page, say) is
      // made again, at most twice, instead of the cell counting as run with an empty prompt.
      for (let attempt = 0; ; attempt++) {
        await editor.click();
        await page.keyboard.press('Shift+Enter');
        const started = await page
          .waitForFunction(
            (i) => {
              const c = Jupyter.notebook.get_cell(i);
              const n = c.input_prompt_number;
              return n === '*' || typeof n === 'number' || c.element.find('input.raw_input').length > 0;
            },
            i,
            { timeout: 5000, polling: 50 },
          )
          .then(() => true)
          .catch(() => false);
        if (started) break;
        if (attempt === 2) throw new Error('Shift+Enter did not run the cell (3 tries)');
        run.retries = attempt + 1;
      }
      // done: the prompt is a number (or empty when the kernel aborted it) and the kernel is idle; or the
      // cell asks for input
      const state = await page.waitForFunction(
        (i) => {
          const c = Jupyter.notebook.get_cell(i);
          if (c.element.find('input.raw_input').length) return 'input';
          const idle = document.querySelector('#kernel_indicator_icon.kernel_idle_icon') !== null;
          return c.input_prompt_number !== '*' && idle ? 'done' : false;
        },
        i,
        { timeout: Math.min(left(), 20000), polling: 50 },
      );
      if ((await state.jsonValue()) === 'input') {
        const box = page.locator('input.raw_input');
        run.inputPrompt = await page.locator('pre.raw_input_prompt').first().innerText();
        result.inputPrompt = run.inputPrompt;
        await box.click();
        await box.pressSequentially(cfg.answer, { delay: 10 });
        await box.press('Enter');
        step('answered input');
        await page.waitForFunction(
          (i) =>
            Jupyter.notebook.get_cell(i).input_prompt_number !== '*' &&
            document.querySelector('#kernel_indicator_icon.kernel_idle_icon') !== null,
          i,
          { timeout: Math.min(left(), 20000), polling: 50 },
        );
      }
      if ((cfg.reconnectAfter ?? []).includes(i)) {
        // As the Kernel menu's Reconnect: the page's extensions greet the kernel again.
        await page.evaluate(() => Jupyter.notebook.kernel.reconnect());
        await page.waitForFunction(
          () =>
            Jupyter.notebook.kernel.is_connected() &&
            document.querySelector('#kernel_indicator_icon.kernel_idle_icon') !== null,
          null,
          { timeout: Math.min(left(), 20000), polling: 50 },
        );
        await page.waitForTimeout(500);
        step('reconnected');
      }
      run.done = true;
    } catch (e) {
      run.error = String(e).split('\n')[0];
    }
    step('cell ' + i);
  }
  // Let images finish decoding, and MathJax and plotly finish drawing, before the page is read and shot.
  await page
    .waitForFunction(
      () =>
        !!document.querySelector('.js-plotly-plot svg.main-svg') &&
        !!document.querySelector('.MathJax, .MathJax_Display, .MathJax_SVG, mjx-container'),
      null,
      { timeout: 10000 },
    )
    .catch(() => {});
  await page
    .waitForFunction(() => [...document.querySelectorAll('.output_area img')].every((i) => i.complete), null, {
      timeout: 5000,
    })
    .catch(() => {});

  result.cells = await page.evaluate(readCells);
  // The notebook scrolls inside #site; let it grow so that the full-page screenshot shows every cell.
  await page.addStyleTag({
    content: '#site { height: auto !important; overflow: visible !important; } body { overflow: visible !important; }',
  });
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
