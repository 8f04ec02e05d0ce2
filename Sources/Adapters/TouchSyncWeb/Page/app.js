// The live whiteboard. Your own ink is drawn from your own input in the
// animation frame after the event (local ink), sent as numbered messages
// (kept until the hub acknowledged them, resent after a reconnect) and
// replaced by the hub's stroke when the board's diffs accept it. Undo,
// redo, erase and clear act at once the same way (hidden strokes and an
// overlay until the hub's diffs agree). The board is infinite: a viewport
// maps its points to the screen.
import { Board, UNITS } from './board.js';
import { Renderer, cssColor, onSchemeChange } from './renderer.js';
import { Viewport } from './view.js';
import { attachWheel, PanPinch } from './gestures.js';
import { outline, pathData, inkPoints } from './ink.js';
import { Connection, WIRES } from './connection.js';
import { LocalInk } from './localink.js';
import { Selection, unionBounds, touchesRect, touchesLasso, handleAt, inside, scaleFor } from './selection.js';

const boardName = decodeURIComponent(location.pathname.split('/')[2] || 'demo');
const canvas = document.getElementById('board');
const statusEl = document.getElementById('status');
const usersEl = document.getElementById('users');
const board = new Board();
const view = new Viewport();
const renderer = new Renderer(canvas, view);
export const PALETTE = [0x1E88E5FF, 0xE53935FF, 0x43A047FF, 0xFB8C00FF, 0x8E24AAFF, 0x00897BFF, 0x6D4C41FF, 0x212121FF];
export const WIDTHS = [2, 4, 8, 16];
const REFUSED_FOR_GOOD = new Set(['UNAUTHORIZED', 'FORBIDDEN', 'UNKNOWN_BOARD']);

// State the tests (and the curious) can read: window.touchsync.
const app = window.touchsync = {
  board, renderer, view, boardName, user: null, name: null, connected: false,
  errors: [], refusals: [], renders: 0, frameIntervals: [],
  // Samples this page sent, per touch in progress and for every touch that ended.
  sent: { live: {}, endedSamples: 0, endedStrokes: 0, cancelledStrokes: 0 },
  // Bytes of batches received and real samples they carried (bytes per sample).
  received: { batchBytes: 0, batchSamples: 0, snapshotBytes: 0 },
  // Milliseconds from another user's touch (its first sample's time) to the frame that drew it.
  latencies: [], seen: new Set(),
  // Milliseconds from a pointer event of this page to the end of the frame that drew its ink.
  ownInk: [],
  // Others' cursors as they arrived: [x, ms since the epoch].
  cursorArrivals: [],
  users: [], cursors: new Map(),
  // Laser trails by tab (yours: 'me'), each point {x, y, at}; the user whose view this page follows.
  lasers: new Map(), following: null,
  summary: () => board.summary(),
};

// --- Who this tab is: a person, with the name and colour this browser keeps for every tab and visit.
const invited = new URLSearchParams(location.hash.slice(1)).get('token');
if (invited) { localStorage.setItem('touchsync-token', invited); history.replaceState(null, '', location.pathname); }
const token = localStorage.getItem('touchsync-token');
let name = localStorage.getItem('touchsync-name');
const firstVisit = !name;
// A first visit's guest name is the person's at once: tabs opened before it answers the prompt share it.
if (!name) { name = 'Guest ' + Math.floor(100 + Math.random() * 900); localStorage.setItem('touchsync-name', name); }
// A first visit picks a colour from the palette at random; choosing another keeps it for the next visits and tabs.
function personColour() {
  const kept = localStorage.getItem('touchsync-colour');
  if (kept && /^[0-9a-f]{1,8}$/.test(kept)) return parseInt(kept, 16) >>> 0;
  const picked = PALETTE[Math.floor(Math.random() * PALETTE.length)];
  localStorage.setItem('touchsync-colour', (picked >>> 0).toString(16));
  return picked;
}
let colour = personColour();
let width = Number(localStorage.getItem('touchsync-width') ?? 4);
if (!(width > 0 && width <= 200)) width = 4;
Object.defineProperty(app, 'colour', { get: () => colour });
app.PALETTE = PALETTE;

// --- The connection (connection.js): numbered messages, kept until acknowledged, resent after a reconnect.
// The wire asked for in the hello: packed frames (docs/protocol.md, "Packed frames") unless ?wire=binary or ?wire=json;
// the welcome says which the gateway speaks.
const link = new Connection({
  url: (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws',
  board, boardName,
  wire: WIRES.find(w => w === new URLSearchParams(location.search).get('wire')) ?? 'packed2',
  hello: () => ({ board: boardName, name, token }),
  handlers: {
    welcome: welcomed,
    message: receive,
    batch: receiveBatch,
    acknowledged,
    closed: () => { app.connected = false; updateStatus(); },
  },
});
// Your strokes and changes at once, until the hub's diffs agree (localink.js).
const mine = new LocalInk({
  board, user: () => app.user, acked: () => link.acked, post, toast,
  render: rebuild => requestRender(rebuild), dropped: pointer => down.delete(pointer),
  // A copy a duplicate of this tab asked for: selected as it arrives (the copies replace the selection).
  copied: stroke => { selection.add([stroke.id]); requestRender(); },
});
const isHidden = stroke => mine.isHidden(stroke);
Object.assign(app, { local: mine.local, finished: mine.finished, hidden: mine.hidden, overlay: mine.overlay });

// Why the page stopped for good (null while it carries on): the connection no longer reconnects.
let ended = null;
Object.defineProperties(app, {
  ended: { get: () => ended, set: why => { ended = why; link.ended = why !== null; } },
  pending: { get: () => link.pending },
  acked: { get: () => link.acked },
  rtt: { get: () => link.rtt },
  sockets: { get: () => link.sockets },
});

function post(message) {
  if (app.role === 'watch' || app.ended) return null;
  if (message.t === 'touch') {
    const count = message.s ? message.s.length : 0;
    const live = app.sent.live;
    if (message.phase === 'began') live[message.id] = count;
    else if (message.phase === 'cancelled') { delete live[message.id]; app.sent.cancelledStrokes++; }
    else live[message.id] = (live[message.id] ?? 0) + count;
    if (message.phase === 'ended') {
      app.sent.endedSamples += live[message.id];
      app.sent.endedStrokes++;
      delete live[message.id];
    }
  }
  return link.post(message);
}

function welcomed(m, renumbered) {
  app.wire = m.wire ?? 'json';
  app.role = m.role;
  app.name = m.name;
  app.connected = true;
  document.body.classList.toggle('admin', m.role === 'admin');
  if (m.role === 'watch') {
    app.user = null;
    document.body.classList.add('watching');
  } else {
    app.user = m.user;
    if (renumbered) {
      // What waits for the renumbered messages follows them (numbers already acknowledged stay below 1).
      mine.renumber(n => renumbered.get(n) ?? 0);
      if (!link.pending.some(message => message.t === 'style')) sendStyle();
    }
  }
  updateStatus();
}

function receive(m, bytes) {
  switch (m.t) {
    case 'refused':
      app.refusals.push(m);
      mine.refused(m.n, m.message);
      toast(`refused: ${m.message}`);
      break;
    case 'snapshot':
      app.received.snapshotBytes = bytes;
      board.loadSnapshot(m);
      mine.loaded();
      if (!fitted && board.accepted.length > 0 && !boardFitsView()) fitBoard();
      fitted = true;
      requestRender();
      break;
    case 'users':
      app.users = m.list;
      showUsers();
      break;
    case 'presence': {
      // Another tab's pointer: shown until it leaves the board, or 10 s without news; its laser leaves a trail.
      const at = performance.now();
      app.cursorArrivals.push([m.x, performance.timeOrigin + at]);
      if (app.cursorArrivals.length > 4000) app.cursorArrivals.splice(0, 2000);
      if (m.x === null || m.x === undefined) app.cursors.delete(m.id);
      else app.cursors.set(m.id, { ...m, at });
      if (m.laser && m.x !== null && m.x !== undefined) trail(m.id).push({ x: m.x, y: m.y, at });
      if (m.view && app.following !== null && m.user === app.following) showView(m.view);
      requestRender();
      break;
    }
    case 'pong':
      break;
    case 'hub':
      app.hubState = m.state;
      break;
    case 'error':
      app.errors.push(m);
      if (REFUSED_FOR_GOOD.has(m.code) && !m.from) {
        // Refusals of who the tab is or of the board: the gateway closes the socket; trying again would be refused too.
        app.ended = m.message;
        showBanner(m.code === 'UNKNOWN_BOARD' ? `This board cannot be opened: ${m.message}` : `Closed: ${m.message}`);
      } else {
        toast(m.message);
      }
      break;
  }
  updateStatus();
}

function receiveBatch(batch, bytes) {
  app.received.batchBytes += bytes;
  for (const d of batch[2]) if (d[0] === 'a') app.received.batchSamples += d[3].length / 4;
  const result = board.applyBatch(batch);
  if (result === 'gap') { board.reset(); link.send({ t: 'resync' }); }
  else if (result === 'applied') { mine.reconcile(); requestRender(); }
}

// The hub acknowledged every message numbered up to `through`: your ink and its undo wait for that.
function acknowledged(through, now) {
  mine.acknowledged(through, now);
  updateStatus();
}

// --- Rendering: at most once per display frame, only when something changed.
let renderQueued = false;
let rebuildQueued = false;
let lastFrame = 0;
let inputTimes = [];   // event times (performance.now clock) whose ink the next frame draws
// A switch to or from dark mode redraws everything (ink colours change) and the swatches.
onSchemeChange(() => { showStyle(); showUsers(); requestRender(true); });
function requestRender(rebuild = false) {
  if (rebuild) rebuildQueued = true;
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(now => {
    renderQueued = false;
    if (lastFrame) app.frameIntervals.push(now - lastFrame);
    if (app.frameIntervals.length > 4000) app.frameIntervals.splice(0, 2000);
    lastFrame = now;
    const fresh = [...board.active.values(), ...(board.changedAccepted === 'all' ? [] : board.changedAccepted)];
    const lifted = drag && !choosing(drag);   // the selection being moved or scaled: drawn apart from the cached layer
    const hiding = mine.hidden.size > 0 || mine.clearing.length > 0 || mine.editing.size > 0 || lifted;
    renderer.render(board, {
      hidden: hiding ? (lifted ? s => isHidden(s) || selection.has(s.id) : isHidden) : null,
      rebuild: rebuildQueued,
      own: app.user,
      ownTouches: mine.touches,
      local: mine.drawn,
      overlay: lifted ? mine.overlayStrokes.filter(s => !selection.has(s.id)) : mine.overlayStrokes,
      moving: lifted ? { strokes: drag.strokes.map(shown), transform: dragTransform(drag) } : null,
      selection: selectionBox(),
      marquee: drag?.kind === 'marquee' ? [...drag.from, ...drag.to] : null,
      lasso: drag?.kind === 'lasso' ? drag.path : null,
      names: new Map(app.users.map(u => [u.user, u.name])),
      cursors: [...app.cursors.values()],
      lasers: [...app.lasers.values()].map(points => points.map(p => ({ x: p.x, y: p.y, age: (now - p.at) / LASER_FADE }))),
    });
    // A laser trail fades frame by frame; the view you show goes to your followers.
    for (const [id, points] of app.lasers) {
      while (points.length > 0 && now - points[0].at > LASER_FADE) points.shift();
      if (points.length === 0) app.lasers.delete(id);
    }
    if (app.lasers.size > 0) requestRender();
    if (view.version !== sentView && lastPointer) sendCursor(lastPointer);
    rebuildQueued = false;
    app.renders++;
    const drawn = performance.now();
    for (const at of inputTimes) app.ownInk.push(drawn - at);
    inputTimes = [];
    if (app.ownInk.length > 4000) app.ownInk.splice(0, 2000);
    const drawnAt = performance.timeOrigin + drawn;
    for (const stroke of fresh) {
      if (stroke.owner === app.user || app.seen.has(stroke.id) || stroke.s.length === 0) continue;
      app.seen.add(stroke.id);
      app.latencies.push(drawnAt - stroke.s[2] / 1000);
    }
    zoomLabel.textContent = Math.round(view.zoom * 100) + '%';
  });
}
renderer.onRebuildDue = () => requestRender(true);
new ResizeObserver(() => { renderer.resize(); requestRender(true); }).observe(canvas);
matchMedia(`(resolution: ${window.devicePixelRatio}dppx)`).addEventListener?.('change', () => { renderer.resize(); requestRender(true); });

// --- Input: pointer events are touch phases; coalesced and predicted events are samples.
const down = new Map();   // pointerId -> last time sent (ms)
const moving = new PanPinch(view);   // pointers that pan and zoom instead of drawing
let eraser = false;
let laser = false;   // the laser pointer: a fading trail others see, never ink
let select = false;  // the selection tool: select, move, scale, recolour, delete and copy strokes
let spaceHeld = false;
let penSeenAt = -Infinity;
// Two fingers pan and zoom (as in tldraw and Excalidraw), unless every finger is to draw (the seeds' multi-touch).
let everyFingerDraws = localStorage.getItem('touchsync-fingers') === 'draw';
app.setEveryFingerDraws = on => {
  everyFingerDraws = on;
  localStorage.setItem('touchsync-fingers', on ? 'draw' : 'pan');
  document.getElementById('fingers').textContent = on ? 'Two fingers pan and zoom' : 'Every finger draws (multi-touch)';
};

// --- Presence: your pointer goes to the others with the board rectangle you see (at most every 50 ms,
// 16 ms with the laser; the gateway keeps the pace too); theirs are drawn as arrows with names, their
// laser as a trail that fades, and you may follow one's view (docs/protocol.md, "Presence").
const CURSOR_INTERVAL = 50, LASER_INTERVAL = 16, LASER_FADE = 1000;
let cursorSentAt = -Infinity, cursorTimer = null, cursorDue = null, lastPointer = null, sentView = -1;
const round = v => Math.round(v * 10) / 10;
function sendCursor(point, withLaser = false) {
  cursorDue = point ? { point, laser: withLaser } : null;
  lastPointer = point;
  if (cursorTimer !== null) return;
  const wait = cursorSentAt + (withLaser ? LASER_INTERVAL : CURSOR_INTERVAL) - performance.now();
  const flush = () => {
    cursorTimer = null;
    cursorSentAt = performance.now();
    sentView = view.version;
    if (!cursorDue) { link.send({ t: 'cursor' }); return; }
    link.send({
      t: 'cursor', x: round(cursorDue.point[0]), y: round(cursorDue.point[1]), laser: cursorDue.laser || undefined,
      view: view.visible(renderer.width, renderer.height).map(round),
    });
  };
  if (wait <= 0) flush(); else cursorTimer = setTimeout(flush, wait);
}
canvas.addEventListener('pointermove', e => {
  if (app.role === 'watch' || e.pointerType === 'touch' || (laser && down.has(e.pointerId))) return;
  sendCursor(boardPoint(e));
});
canvas.addEventListener('pointerleave', () => { if (app.role !== 'watch') sendCursor(null); });
// Your laser: a trail on your screen too, and each point to the others.
function laserAt(e) {
  const [x, y] = boardPoint(e);
  trail('me').push({ x, y, at: performance.now() });
  sendCursor([x, y], true);
  requestRender();
}
function trail(id) {
  if (!app.lasers.has(id)) app.lasers.set(id, []);
  return app.lasers.get(id);
}
// Following someone: your view shows the board rectangle theirs shows, until you move yours or press Esc.
function follow(user) {
  app.following = user;
  const who = app.users.find(u => u.user === user)?.name ?? user;
  $('following').hidden = user === null;
  $('following').textContent = user === null ? '' : `Following ${who} · Esc stops`;
  const latest = [...app.cursors.values()].filter(c => c.user === user && c.view).sort((a, b) => b.at - a.at)[0];
  if (latest) showView(latest.view);
}
function showView(rect) { view.fit(rect, renderer.width, renderer.height, 0); requestRender(); }
canvas.addEventListener('wheel', () => { if (app.following) follow(null); }, { passive: true });
canvas.addEventListener('pointerdown', () => { if (app.following && (spaceHeld || moving.size > 0)) follow(null); });
setInterval(() => {
  const now = performance.now();
  let gone = false;
  for (const [id, cursor] of app.cursors) if (now - cursor.at > 10_000) { app.cursors.delete(id); gone = true; }
  if (gone) requestRender();
}, 2000);

function boardPoint(e) {
  const rect = canvas.getBoundingClientRect();
  return view.toBoard(e.clientX - rect.left, e.clientY - rect.top);
}
function screenPoint(e) {
  const rect = canvas.getBoundingClientRect();
  return [e.clientX - rect.left, e.clientY - rect.top];
}

// A sample: [x, y, t, pressure, azimuth, altitude]. Pens and touch screens give
// pressure; a mouse gives none (its ink simulates one from speed).
function sample(e, pointerId) {
  const [x, y] = boardPoint(e);
  const last = down.get(pointerId) ?? 0;
  const time = Math.max(last, performance.timeOrigin + e.timeStamp);
  const pen = e.pointerType === 'pen';
  const pressured = pen || (e.pointerType === 'touch' && e.pressure > 0);
  const hasAngles = pen && (e.altitudeAngle !== undefined || e.tiltX !== 0 || e.tiltY !== 0);
  return [
    x, y, time,
    pressured ? Math.min(1, Math.max(0, e.pressure)) : null,
    hasAngles ? (e.azimuthAngle ?? 0) : null,
    hasAngles ? (e.altitudeAngle ?? Math.PI / 2) : null,
  ];
}

function samplesOf(e, list) {
  const samples = [];
  for (const event of list.length ? list : [e]) {
    const s = sample(event, e.pointerId);
    samples.push(s);
    down.set(e.pointerId, s[2]);
  }
  return samples;
}

function predictedOf(e) {
  if (!e.getPredictedEvents) return [];
  const last = down.get(e.pointerId) ?? 0;
  return e.getPredictedEvents().map(p => { const [x, y] = boardPoint(p); return [x, y, Math.max(last, performance.timeOrigin + p.timeStamp), null, null, null]; });
}

const inkOf = s => [s[0], s[1], s[2], s[3]];

function erase(e) {
  const [x, y] = boardPoint(e);
  const slop = 6 / view.zoom;
  for (let i = board.accepted.length - 1; i >= 0; i--) {
    const s = board.accepted[i];
    if (isHidden(s)) continue;
    const reach = (s.w / 2 + slop * UNITS) ** 2;
    for (let k = 0; k < s.s.length; k += 4) {
      const dx = s.s[k] - x * UNITS, dy = s.s[k + 1] - y * UNITS;
      if (dx * dx + dy * dy <= reach) {
        const n = post({ t: 'erase', strokes: [s.id] });
        if (n !== null) mine.hidden.set(s.id, { n, ackedAt: null });
        requestRender(true);
        return;
      }
    }
  }
}

// Touches pan and pinch instead of drawing while a pen is down or was used in the last 3 s (palm rejection).
function touchPans(e) { return e.pointerType === 'touch' && (performance.now() - penSeenAt < 3000 || [...down.keys()].some(id => penPointers.has(id))); }
const penPointers = new Set();

function startGesture(e) {
  // A second finger turns a one-finger stroke into a gesture: that stroke is cancelled.
  for (const [pointer, ink] of [...mine.local]) {
    if (ink.pointerType !== 'touch') continue;
    if (lastScreen.has(pointer)) moving.add(pointer, ...lastScreen.get(pointer));
    cancelInk(pointer);
  }
  moving.add(e.pointerId, ...screenPoint(e));
}
const lastScreen = new Map();

function cancelInk(pointer) {
  if (!mine.local.has(pointer)) return;
  mine.local.delete(pointer);
  down.delete(pointer);
  post({ t: 'touch', phase: 'cancelled', id: pointer });
  requestRender();
}

canvas.addEventListener('pointerdown', e => {
  e.preventDefault();
  // The board takes the keyboard from the name prompt (a first visit's) and any other field, so shortcuts work from the first stroke.
  if (!$('name-dialog').hidden) skipName();
  if (document.activeElement instanceof HTMLElement && document.activeElement !== canvas) document.activeElement.blur();
  canvas.focus({ preventScroll: true });
  canvas.setPointerCapture?.(e.pointerId);
  if (e.pointerType === 'pen') { penSeenAt = performance.now(); penPointers.add(e.pointerId); }
  const touching = [...mine.local.values()].filter(ink => ink.pointerType === 'touch').length;
  const fingerMoves = e.pointerType === 'touch' && (touchPans(e) || !everyFingerDraws && (moving.size > 0 || touching > 0));
  if (spaceHeld || e.button === 1 || fingerMoves || app.role === 'watch' || app.ended) {
    if (e.pointerType === 'touch' && touching > 0 && moving.size === 0 && !everyFingerDraws) startGesture(e);
    else moving.add(e.pointerId, ...screenPoint(e));
    canvas.classList.add('panning');
    return;
  }
  if (eraser) { erase(e); down.set(e.pointerId, 0); return; }
  if (laser) { down.set(e.pointerId, 0); laserAt(e); return; }
  if (select && drag && e.pointerType === 'touch') {
    // A second finger: the drag is dropped (nothing sent) and this finger pans and zooms.
    drag = null;
    moving.add(e.pointerId, ...screenPoint(e));
    canvas.classList.add('panning');
    requestRender(true);
    return;
  }
  if (select) { selectDown(e); return; }
  down.set(e.pointerId, 0);
  lastScreen.set(e.pointerId, screenPoint(e));
  const s = samplesOf(e, []);
  const n = post({ t: 'touch', phase: 'began', id: e.pointerId, s, p: predictedOf(e) });
  if (n === null) return;
  mine.undone.length = 0;   // the hub ends what can be redone at a new stroke
  mine.local.set(e.pointerId, {
    touch: e.pointerId, pointerType: e.pointerType, points: s.map(inkOf), predicted: predictedOf(e).map(inkOf),
    rgba: colour, width, complete: false, numbers: [n], ackedAt: null, hiddenBy: null, startedAt: e.timeStamp,
  });
  inputTimes.push(e.timeStamp);
  requestRender();
});
canvas.addEventListener('pointermove', e => {
  if (moving.move(e.pointerId, ...screenPoint(e))) { requestRender(); return; }
  if (drag && drag.pointer === e.pointerId) {
    drag.to = boardPoint(e);
    if (drag.kind === 'lasso') extendLasso(drag, drag.to);
    requestRender();
    return;
  }
  if (!down.has(e.pointerId)) return;
  if (eraser) { erase(e); return; }
  if (laser) { laserAt(e); return; }
  lastScreen.set(e.pointerId, screenPoint(e));
  const s = samplesOf(e, e.getCoalescedEvents ? e.getCoalescedEvents() : []);
  const p = predictedOf(e);
  const n = post({ t: 'touch', phase: 'moved', id: e.pointerId, s, p });
  const ink = mine.local.get(e.pointerId);
  if (ink && n !== null) {
    for (const sample of s) ink.points.push(inkOf(sample));
    ink.predicted = p.map(inkOf);   // the previous guess is thrown away (seed 002)
    ink.numbers.push(n);
    inputTimes.push(e.timeStamp);
    requestRender();
  }
});
function pointerEnds(e, cancelled) {
  lastScreen.delete(e.pointerId);
  penPointers.delete(e.pointerId);
  if (moving.has(e.pointerId)) {
    moving.remove(e.pointerId);
    if (moving.size === 0) canvas.classList.remove('panning');
    return;
  }
  if (drag && drag.pointer === e.pointerId) { if (!cancelled) drag.to = boardPoint(e); selectUp(cancelled); return; }
  if (!down.has(e.pointerId)) return;
  if (eraser || laser) { down.delete(e.pointerId); return; }
  if (cancelled) { cancelInk(e.pointerId); return; }   // a palm or a system gesture: abandoned (seed 003)
  const s = samplesOf(e, []);
  down.delete(e.pointerId);
  const n = post({ t: 'touch', phase: 'ended', id: e.pointerId, s });
  const ink = mine.local.get(e.pointerId);
  mine.local.delete(e.pointerId);
  if (ink && n !== null) {
    for (const sample of s) ink.points.push(inkOf(sample));
    ink.predicted = [];
    ink.complete = true;
    ink.numbers.push(n);
    mine.finished.push(ink);
    mine.ended();
    inputTimes.push(e.timeStamp);
    requestRender();
  }
}
canvas.addEventListener('pointerup', e => pointerEnds(e, false));
canvas.addEventListener('pointercancel', e => pointerEnds(e, true));
attachWheel(canvas, view, () => requestRender());

// --- Select and edit (V; docs/protocol.md, "Edits"): a click, a marquee or (Alt held) a lasso selects your strokes
// (anyone's for an admin), a drag inside the selection moves it, its corner handle scales it; Delete,
// Ctrl-D (copies), a colour and the arrow keys act on it. Each change is one edit the hub orders and
// undoes; the page shows it at once (localink.js) and while dragging draws the selection apart.
const selection = new Selection();
let drag = null;   // {pointer, kind: 'move', 'scale', 'marquee' or 'lasso', from, to (board points), bounds, strokes, path (a lasso's points)}
const shown = s => mine.editing.get(s.id)?.stroke ?? s;   // a stroke as this page shows it (an edit's preview)
const gone = s => mine.hidden.has(s.id) || (isHidden(s) && !mine.editing.has(s.id));
const editable = s => (s.owner === app.user || app.role === 'admin') && !gone(s);
const selected = () => selection.strokes(board).filter(s => !gone(s));
Object.assign(app, { selection, selectionBounds: () => unionBounds(selected().map(shown)) });

function strokeUnder([x, y]) {
  const slop = 6 / view.zoom;
  for (let i = board.accepted.length - 1; i >= 0; i--) {
    const s = board.accepted[i];
    if (!editable(s)) continue;
    const { s: samples, w } = shown(s);
    const reach = (w / 2 + slop * UNITS) ** 2;
    for (let k = 0; k < samples.length; k += 4) {
      const dx = samples[k] - x * UNITS, dy = samples[k + 1] - y * UNITS;
      if (dx * dx + dy * dy <= reach) return s;
    }
  }
  return null;
}
function selectDown(e) {
  const p = boardPoint(e);
  let strokes = selected();
  let bounds = unionBounds(strokes.map(shown));
  let kind = e.altKey ? 'lasso' : 'marquee';   // Alt: a freehand loop instead of a rectangle, from anywhere
  if (kind === 'lasso') {
    if (!e.shiftKey) selection.clear();
  } else if (bounds && inside(p, handleAt(bounds, view.zoom, e.pointerType === 'touch' ? 32 : 12))) kind = 'scale';   // a finger gets a larger target
  else if (bounds && inside(p, bounds)) kind = 'move';
  else {
    const hit = strokeUnder(p);
    if (!e.shiftKey) selection.clear();
    if (hit) {
      selection.add([hit.id]);
      strokes = selected();
      bounds = unionBounds(strokes.map(shown));
      kind = 'move';
    }
  }
  drag = { pointer: e.pointerId, kind, from: p, to: p, bounds, strokes, path: kind === 'lasso' ? [p] : null };
  requestRender(true);   // the lifted strokes leave the cached layer
}
// A lasso's next point, once the pointer moved two screen pixels from the last (bounded: 4,096 points).
function extendLasso(d, p) {
  const last = d.path[d.path.length - 1];
  if (d.path.length < 4096 && Math.hypot(p[0] - last[0], p[1] - last[1]) * view.zoom >= 2) d.path.push(p);
}
// A drag that picks strokes (a marquee or a lasso), not one that moves or scales the selection.
function choosing(d) { return d.kind === 'marquee' || d.kind === 'lasso'; }
function dragTransform(d) {
  if (d.kind === 'scale') return { dx: 0, dy: 0, scale: scaleFor(d.bounds, d.from, d.to), ox: d.bounds[0], oy: d.bounds[1] };
  return { dx: d.to[0] - d.from[0], dy: d.to[1] - d.from[1], scale: 1, ox: 0, oy: 0 };
}
function selectUp(cancelled) {
  const d = drag;
  drag = null;
  if (!cancelled && d.kind === 'marquee') {
    const rect = [...d.from, ...d.to];
    selection.add(board.accepted.filter(s => editable(s) && touchesRect(shown(s), rect)).map(s => s.id));
  } else if (!cancelled && d.kind === 'lasso') {
    selection.add(board.accepted.filter(s => editable(s) && touchesLasso(shown(s), d.path)).map(s => s.id));
  } else if (!cancelled) {
    const t = dragTransform(d);
    if (t.scale !== 1 || t.dx !== 0 || t.dy !== 0) editSelection('move', t);
  }
  requestRender(true);
}
// The selection's box as drawn: while dragging, where the drag takes it.
function selectionBox() {
  if (selection.size === 0) return null;
  const dragged = drag && !choosing(drag);
  const b = dragged ? drag.bounds : unionBounds(selected().map(shown));
  if (!b) return null;
  if (!dragged) return b;
  const t = dragTransform(drag);
  const at = (x, o, d) => o + (x - o) * t.scale + d;
  return [at(b[0], t.ox, t.dx), at(b[1], t.oy, t.dy), at(b[2], t.ox, t.dx), at(b[3], t.oy, t.dy)];
}
function editSelection(op, fields = {}) {
  const strokes = selected();
  if (strokes.length === 0) return;
  const n = mine.edit({ t: 'edit', op, strokes: strokes.map(s => s.id), ...fields }, strokes);
  if (n !== null && (op === 'delete' || op === 'duplicate')) selection.clear();   // copies are selected as they arrive
  requestRender(true);
}
app.editSelection = editSelection;

// --- Undo, redo and clear of your own strokes: at once, then as the hub says (localink.js).
const undo = () => mine.undo();
const redo = () => mine.redo();
const clear = scope => mine.clear(scope);

// --- Toolbar.
const $ = id => document.getElementById(id);
const zoomLabel = $('zoom');
function sendStyle() {
  localStorage.setItem('touchsync-colour', (colour >>> 0).toString(16));
  localStorage.setItem('touchsync-width', String(width));
  post({ t: 'style', rgba: colour, width });
}
function showStyle() {
  $('colour').style.setProperty('--swatch', cssColor(colour));
  for (const b of document.querySelectorAll('#palette button')) b.classList.toggle('on', Number(b.dataset.rgba) === colour);
  for (const b of document.querySelectorAll('#widths button')) b.classList.toggle('on', Number(b.dataset.width) === width);
  $('eraser').classList.toggle('on', eraser);
  $('laser').classList.toggle('on', laser);
  $('select').classList.toggle('on', select);
  $('pen').classList.toggle('on', !eraser && !laser && !select);
  canvas.classList.toggle('selecting', select);
}
$('palette').replaceChildren(...PALETTE.map(rgba => {
  const b = document.createElement('button');
  b.dataset.rgba = String(rgba);
  b.title = cssColor(rgba);
  b.style.setProperty('--swatch', cssColor(rgba));
  b.addEventListener('click', () => {
    // With a selection, the colour is the selection's too (and the pen's, as in tldraw).
    if (select && selection.size > 0) editSelection('recolour', { rgba });
    colour = rgba; sendStyle(); showStyle(); closeMenus();
  });
  return b;
}));
$('widths').replaceChildren(...WIDTHS.map(w => {
  const b = document.createElement('button');
  b.dataset.width = String(w);
  b.title = `${w} pt`;
  b.innerHTML = `<i style="width:${Math.min(18, w + 2)}px;height:${Math.min(18, w + 2)}px"></i>`;
  b.addEventListener('click', () => { width = w; sendStyle(); showStyle(); closeMenus(); });
  return b;
}));
function toggleMenu(id) {
  const menu = $(id);
  const open = menu.hidden;
  closeMenus();
  menu.hidden = !open;
}
function closeMenus() { for (const m of document.querySelectorAll('.menu')) m.hidden = true; }
$('colour').addEventListener('click', () => toggleMenu('style-menu'));
$('more').addEventListener('click', () => toggleMenu('more-menu'));
function useTool(name) {
  eraser = name === 'eraser'; laser = name === 'laser'; select = name === 'select';
  if (!select && selection.size > 0) { selection.clear(); requestRender(); }
  showStyle();
}
$('select').addEventListener('click', () => useTool('select'));
$('pen').addEventListener('click', () => useTool('pen'));
$('eraser').addEventListener('click', () => useTool('eraser'));
$('laser').addEventListener('click', () => useTool('laser'));
$('users').addEventListener('click', e => {
  const user = e.target.closest('li')?.dataset.user;
  if (user && user !== app.user) follow(app.following === user ? null : user);
});
$('following').addEventListener('click', () => follow(null));
$('undo').addEventListener('click', undo);
$('redo').addEventListener('click', redo);
$('clear-mine').addEventListener('click', () => { closeMenus(); clear('mine'); });
$('clear-board').addEventListener('click', () => {
  closeMenus();
  if (confirm('Clear every stroke on this board, everyone\'s?')) clear('board');
});
$('fit').addEventListener('click', fitBoard);
$('help').addEventListener('click', () => { $('help-overlay').hidden = !$('help-overlay').hidden; });
$('help-overlay').addEventListener('click', () => { $('help-overlay').hidden = true; });
$('export-png').addEventListener('click', () => { closeMenus(); exportImage('png'); });
$('export-svg').addEventListener('click', () => { closeMenus(); exportImage('svg'); });
$('export-view').addEventListener('click', () => { closeMenus(); exportImage('png', true); });
$('share').addEventListener('click', async () => {
  closeMenus();
  const link = location.origin + '/boards/' + encodeURIComponent(boardName);
  try { await navigator.clipboard.writeText(link); toast('link copied: ' + link); } catch { prompt('Share this link', link); }
});
$('rename').addEventListener('click', () => { closeMenus(); askName(); });
$('fingers').addEventListener('click', () => { closeMenus(); app.setEveryFingerDraws(!everyFingerDraws); });
app.setEveryFingerDraws(everyFingerDraws);
$('replay-link').href = `/boards/${encodeURIComponent(boardName)}/replay`;
$('board-name').textContent = boardName;
document.title = boardName + ' · TouchSync';
showStyle();

// --- Keyboard: Ctrl/Cmd-Z, Ctrl/Cmd-Shift-Z, Ctrl-Y, E, P, space-drag, +, -, 0, ?.
document.addEventListener('keydown', e => {
  if (e.target instanceof HTMLInputElement) return;
  const command = e.ctrlKey || e.metaKey;
  const key = e.key.toLowerCase();
  if (command && e.code === 'KeyZ') { e.preventDefault(); (e.shiftKey ? redo : undo)(); return; }
  if (command && e.code === 'KeyY') { e.preventDefault(); redo(); return; }
  if (command && e.code === 'KeyD' && selection.size > 0) { e.preventDefault(); editSelection('duplicate', { dx: 16, dy: 16 }); return; }
  if (command && e.code === 'KeyA') {
    e.preventDefault();
    useTool('select');
    selection.set(board.accepted.filter(editable).map(s => s.id));
    requestRender();
    return;
  }
  if (command) return;
  if (selection.size > 0) {
    const step = e.shiftKey ? 10 : 1;
    const nudge = { arrowleft: [-step, 0], arrowright: [step, 0], arrowup: [0, -step], arrowdown: [0, step] }[key];
    if (nudge) { e.preventDefault(); editSelection('move', { dx: nudge[0], dy: nudge[1] }); return; }
    if (key === 'delete' || key === 'backspace') { e.preventDefault(); editSelection('delete'); return; }
  }
  const centre = [renderer.width / 2, renderer.height / 2];
  switch (key) {
    case ' ': spaceHeld = true; canvas.classList.add('pan-ready'); e.preventDefault(); break;
    case 'e': useTool('eraser'); break;
    case 'p': case 'd': useTool('pen'); break;
    case 'l': useTool('laser'); break;
    case 'v': useTool('select'); break;
    case '+': case '=': view.zoomAt(1.25, ...centre); requestRender(); break;
    case '-': case '_': view.zoomAt(0.8, ...centre); requestRender(); break;
    case '0': fitBoard(); break;
    case '1': view.zoomAt(1 / view.zoom, ...centre); requestRender(); break;
    case '?': $('help-overlay').hidden = !$('help-overlay').hidden; break;
    case 'escape': closeMenus(); $('help-overlay').hidden = true; follow(null); selection.clear(); requestRender(); break;
  }
});
document.addEventListener('keyup', e => { if (e.key === ' ') { spaceHeld = false; canvas.classList.remove('pan-ready'); } });

// --- The view: fit the board, or its top left at 100% when it is empty.
let fitted = false;
function boardBounds() {
  let rect = null;
  for (const stroke of board.accepted) {
    if (isHidden(stroke)) continue;
    const b = stroke.shape?.bounds ?? flatBounds(stroke.s);
    if (!b) continue;
    rect = rect ? [Math.min(rect[0], b[0]), Math.min(rect[1], b[1]), Math.max(rect[2], b[2]), Math.max(rect[3], b[3])] : b.slice();
  }
  return rect;
}
function flatBounds(s) {
  if (s.length < 4) return null;
  let r = [Infinity, Infinity, -Infinity, -Infinity];
  for (let k = 0; k < s.length; k += 4) {
    const x = s[k] / UNITS, y = s[k + 1] / UNITS;
    r = [Math.min(r[0], x), Math.min(r[1], y), Math.max(r[2], x), Math.max(r[3], y)];
  }
  return r;
}
function boardFitsView() {
  const b = boardBounds(), v = view.visible(renderer.width, renderer.height);
  return !b || (b[0] >= v[0] && b[1] >= v[1] && b[2] <= v[2] && b[3] <= v[3]);
}
function fitBoard() {
  const b = boardBounds();
  if (b) view.fit(b, renderer.width, renderer.height); else view.reset();
  requestRender();
}
app.fitBoard = fitBoard;

// --- Export: the board (or the view) as PNG or SVG, drawn with the same outlines.
function exportSVG(rect) {
  const [x0, y0, x1, y1] = rect;
  const w = x1 - x0, h = y1 - y0;
  let out = `<svg xmlns="http://www.w3.org/2000/svg" width="${w.toFixed(0)}" height="${h.toFixed(0)}" viewBox="${x0} ${y0} ${w} ${h}">\n`;
  out += `<rect x="${x0}" y="${y0}" width="100%" height="100%" fill="white"/>\n`;
  for (const stroke of board.accepted) {
    if (isHidden(stroke) || stroke.s.length === 0) continue;
    const d = pathData(outline(inkPoints(stroke.s), stroke.w / UNITS, true));
    out += `<path data-stroke="${stroke.id}" d="${d}" fill="#${(stroke.rgba >>> 8).toString(16).padStart(6, '0')}" fill-opacity="${((stroke.rgba & 255) / 255).toFixed(2)}"/>\n`;
  }
  return out + '</svg>\n';
}
app.exportSVG = () => exportSVG(paddedBounds());
function paddedBounds() {
  const b = boardBounds() ?? [0, 0, 400, 300];
  return [b[0] - 20, b[1] - 20, b[2] + 20, b[3] + 20];
}
async function exportImage(kind, onlyView = false) {
  const rect = onlyView ? view.visible(renderer.width, renderer.height) : paddedBounds();
  const svg = exportSVG(rect);
  let blob = new Blob([svg], { type: 'image/svg+xml' });
  if (kind === 'png') {
    const image = new Image();
    image.src = URL.createObjectURL(blob);
    await image.decode();
    const scale = window.devicePixelRatio || 1;
    const c = document.createElement('canvas');
    c.width = Math.ceil((rect[2] - rect[0]) * scale);
    c.height = Math.ceil((rect[3] - rect[1]) * scale);
    c.getContext('2d').drawImage(image, 0, 0, c.width, c.height);
    URL.revokeObjectURL(image.src);
    blob = await new Promise(resolve => c.toBlob(resolve, 'image/png'));
  }
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = `${boardName}.${kind}`;
  a.click();
  setTimeout(() => URL.revokeObjectURL(a.href), 10_000);
}

// --- People.
function showUsers() {
  usersEl.replaceChildren(...app.users.map(u => {
    const li = document.createElement('li');
    li.textContent = u.name + (u.user === app.user ? ' (you)' : '');
    li.title = u.name;
    li.style.setProperty('--swatch', u.rgba !== undefined && u.rgba !== null ? cssColor(u.rgba) : '#999');
    li.dataset.user = u.user;
    return li;
  }));
  $('user-count').textContent = String(app.users.length);
}
function askName() {
  const dialog = $('name-dialog');
  $('name-input').value = name;
  dialog.hidden = false;
  $('name-input').focus();
  $('name-input').select();
}
$('name-form').addEventListener('submit', e => {
  e.preventDefault();
  const chosen = $('name-input').value.trim().slice(0, 40);
  $('name-dialog').hidden = true;
  if (!chosen || chosen === name) { localStorage.setItem('touchsync-name', name); return; }
  name = chosen;
  localStorage.setItem('touchsync-name', name);
  link.send({ t: 'name', name });
});
function skipName() { $('name-dialog').hidden = true; localStorage.setItem('touchsync-name', name); }
$('name-skip').addEventListener('click', skipName);
// The person's other tabs follow a new name, colour or width chosen in one of them.
window.addEventListener('storage', e => {
  if (e.key === 'touchsync-name' && e.newValue && e.newValue !== name) {
    name = e.newValue;
    if (app.role !== 'watch') link.send({ t: 'name', name });
  } else if ((e.key === 'touchsync-colour' || e.key === 'touchsync-width') && e.newValue) {
    const rgba = e.key === 'touchsync-colour' ? parseInt(e.newValue, 16) >>> 0 : colour;
    const w = e.key === 'touchsync-width' ? Number(e.newValue) : width;
    if (rgba === colour && w === width) return;
    colour = rgba;
    width = w > 0 && w <= 200 ? w : width;
    showStyle();
    post({ t: 'style', rgba: colour, width });
  }
});
app.closeNameDialog = () => { $('name-dialog').hidden = true; };
if (firstVisit) askName();

// --- Status.
function updateStatus() {
  const waiting = app.pending.length;
  let text;
  if (app.ended) text = `closed: ${app.ended}`;
  else if (!app.connected) text = `offline · ${waiting} waiting`;
  else if (app.hubState === 'unreachable' || app.hubState === 'busy') text = `hub ${app.hubState} · ${waiting} waiting`;
  else if (waiting > 0 && app.pending[0].sentAt !== undefined && performance.now() - app.pending[0].sentAt > 2000) text = `${waiting} unacknowledged`;
  else {
    const recent = app.rtt.slice(-20);
    const rtt = recent.length ? (recent.reduce((a, b) => a + b, 0) / recent.length).toFixed(0) : '–';
    text = app.role === 'watch' ? `watching` : `${rtt} ms`;
  }
  statusEl.textContent = text;
  statusEl.title = app.role === 'watch' ? `watching · ${board.accepted.length} strokes`
    : `${app.name ?? name} · round trip to the hub · ${board.accepted.length} strokes · ${waiting} waiting`;
  statusEl.className = app.ended ? 'ended' : app.connected ? 'online' : 'offline';
}
setInterval(() => { updateStatus(); mine.reconcile(); }, 500);

let toastTimer = null;
function toast(text) {
  const el = $('toast');
  el.textContent = text;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 4000);
}
function showBanner(text) {
  const el = $('banner');
  el.textContent = text;
  el.hidden = false;
  document.body.classList.add('ended');
}

// A closed tab says goodbye, so its live touches are cancelled at once.
window.addEventListener('pagehide', () => {
  link.send({ t: 'bye' });
});

app.post = post;
app.undo = undo;
app.redo = redo;
// For tests: a dropped connection (reconnects after the back-off), or one held
// down until app.reconnect(), so a test can look at the page while it is offline
// however slowly the machine runs.
app.disconnect = ({ hold = false } = {}) => link.disconnect(hold);
app.reconnect = () => link.reconnect();
app.rawSocket = () => link.socket;                      // for tests: messages the page itself would not send
app.requestRender = requestRender;
// For tests: the canvas pixel [r, g, b, a] under a CSS point of the canvas, and the next frame.
app.pixelAt = (x, y) => Array.from(renderer.ctx.getImageData(Math.round(x * renderer.ratio), Math.round(y * renderer.ratio), 1, 1).data);
app.nextFrame = () => new Promise(resolve => requestAnimationFrame(() => resolve()));
link.connect();
requestRender();
