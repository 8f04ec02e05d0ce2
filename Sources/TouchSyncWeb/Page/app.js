// The live whiteboard: pointer input to numbered messages (kept until the hub
// acknowledged them, resent after a reconnect), the board replica from the
// gateway's snapshot and batches, and the toolbar.
import { Board, Renderer, UNITS } from './board.js';

const boardName = decodeURIComponent(location.pathname.split('/')[2] || 'demo');
const canvas = document.getElementById('board');
const statusEl = document.getElementById('status');
const usersEl = document.getElementById('users');
const board = new Board();
const renderer = new Renderer(canvas);
const palette = [0x1E88E5FF, 0xE53935FF, 0x43A047FF, 0xFB8C00FF, 0x8E24AAFF, 0x00897BFF, 0x6D4C41FF, 0x3949ABFF];

// State the tests (and the curious) can read: window.touchsync.
const app = window.touchsync = {
  board, renderer, boardName, user: null, connected: false, ended: null,
  pending: [], acked: 0, rtt: [], errors: [], refusals: [], renders: 0, frameIntervals: [],
  // Samples this page sent, per touch in progress and for every touch that ended.
  sent: { live: {}, endedSamples: 0, endedStrokes: 0, cancelledStrokes: 0 },
  // Bytes of batches received and real samples they carried (bytes per sample).
  received: { batchBytes: 0, batchSamples: 0, snapshotBytes: 0 },
  // Milliseconds from another user's touch (its first sample's time) to the frame that drew it.
  latencies: [], seen: new Set(),
  summary: () => board.summary(),
};

// --- Numbered messages: kept until acknowledged, resent after a reconnect.
let nextNumber = 1;
let socket = null;
let welcomed = false;
let resume = sessionStorage.getItem('touchsync-resume-' + boardName);
// An invitation link carries its token in the fragment (never sent in a request): keep it here.
const invited = new URLSearchParams(location.hash.slice(1)).get('token');
if (invited) { localStorage.setItem('touchsync-token', invited); history.replaceState(null, '', location.pathname); }
const token = localStorage.getItem('touchsync-token');
let name = localStorage.getItem('touchsync-name') || ('guest-' + Math.random().toString(36).slice(2, 6));
localStorage.setItem('touchsync-name', name);

function post(message) {
  if (app.role === 'watch') return;
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
  message.n = nextNumber++;
  message.sentAt = performance.now();
  app.pending.push(message);
  if (welcomed) transmit(message);
  updateStatus();
}

function transmit(message) {
  const { sentAt, ...wire } = message;
  socket.send(JSON.stringify(wire));
}

// --- Connection, with back-off.
let backoff = 250;
function connect() {
  const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws';
  socket = new WebSocket(url);
  socket.onopen = () => {
    backoff = 250;
    socket.send(JSON.stringify({ t: 'hello', board: boardName, resume, name, token, acked: app.acked }));
  };
  socket.onmessage = event => {
    const message = JSON.parse(event.data);
    if (Array.isArray(message)) {  // a batch: ["b", seq, diffs]
      app.received.batchBytes += event.data.length;
      for (const d of message[2]) if (d[0] === 'a') app.received.batchSamples += d[3].length / 4;
      receiveBatch(message);
      return;
    }
    if (message.t === 'snapshot') app.received.snapshotBytes = event.data.length;
    receive(message);
  };
  socket.onclose = () => {
    app.connected = false;
    welcomed = false;
    updateStatus();
    if (app.ended) return;  // refused for good (no link, no access, revoked): reconnecting would be refused again
    const delay = backoff * (0.5 + Math.random());
    backoff = Math.min(backoff * 2, 5000);
    setTimeout(connect, delay);
  };
  socket.onerror = () => {};
}

function receive(m) {
  switch (m.t) {
    case 'welcome': {
      app.role = m.role;
      document.getElementById('clear-board').hidden = m.role !== 'admin';
      if (m.role === 'watch') {
        app.user = null;
        app.connected = true;
        welcomed = false;
        document.body.classList.add('watching');
        break;
      }
      const newSession = m.resume !== resume;
      resume = m.resume;
      sessionStorage.setItem('touchsync-resume-' + boardName, resume);
      app.user = m.user;
      welcomed = true;
      app.connected = true;
      if (newSession) {
        // A new agent (first visit, or the gateway restarted): number what waits from 1 again.
        app.acked = 0;
        app.pending.forEach((message, index) => { message.n = index + 1; });
        nextNumber = app.pending.length + 1;
        if (!app.pending.some(message => message.t === 'style')) sendStyle();
      } else {
        acknowledge(m.acked);
      }
      for (const message of app.pending) transmit(message);
      break;
    }
    case 'ack':
      acknowledge(m.n);
      break;
    case 'refused':
      app.refusals.push(m);
      toast(`refused: ${m.message}`);
      break;
    case 'snapshot':
      board.loadSnapshot(m);
      requestRender();
      break;
    case 'users':
      usersEl.replaceChildren(...m.list.map(u => {
        const li = document.createElement('li');
        li.textContent = u.name + (u.user === app.user ? ' (you)' : '');
        li.title = u.user;
        return li;
      }));
      break;
    case 'pong':
      break;
    case 'hub':
      app.hubState = m.state;
      break;
    case 'error':
      app.errors.push(m);
      toast(m.message);
      // Refusals of who the tab is: the gateway closes the socket; trying again would be refused too.
      if (m.code === 'UNAUTHORIZED' || m.code === 'FORBIDDEN' || m.code === 'UNKNOWN_BOARD') app.ended = m.message;
      break;
  }
  updateStatus();
}

function receiveBatch(batch) {
  const result = board.applyBatch(batch);
  if (result === 'gap') { board.reset(); socket.send(JSON.stringify({ t: 'resync' })); }
  else if (result === 'applied') requestRender();
}

function acknowledge(through) {
  const now = performance.now();
  while (app.pending.length > 0 && app.pending[0].n <= through) {
    const message = app.pending.shift();
    app.rtt.push(now - message.sentAt);
  }
  if (app.rtt.length > 1000) app.rtt.splice(0, 500);
  app.acked = Math.max(app.acked, through);
}

function updateStatus() {
  const waiting = app.pending.length;
  let text;
  if (app.ended) text = `closed: ${app.ended}`;
  else if (!app.connected) text = `offline — ${waiting} waiting, reconnecting`;
  else if (app.hubState === 'unreachable' || app.hubState === 'busy') text = `the hub is ${app.hubState} — ${waiting} waiting`;
  else if (waiting > 0 && performance.now() - app.pending[0].sentAt > 2000) text = `waiting for the hub — ${waiting} unacknowledged`;
  else {
    const recent = app.rtt.slice(-20);
    const rtt = recent.length ? (recent.reduce((a, b) => a + b, 0) / recent.length).toFixed(1) : '–';
    text = app.role === 'watch'
      ? `watching · ${board.accepted.length} strokes`
      : `online as ${app.user} · ${rtt} ms round trip · ${board.accepted.length} strokes`;
  }
  statusEl.textContent = text;
  statusEl.className = app.connected ? 'online' : 'offline';
}
setInterval(updateStatus, 500);

let toastTimer = null;
function toast(text) {
  const el = document.getElementById('toast');
  el.textContent = text;
  el.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { el.hidden = true; }, 4000);
}

// --- Rendering: at most once per display frame, only when something changed.
let renderQueued = false;
let lastFrame = 0;
function requestRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(now => {
    renderQueued = false;
    if (lastFrame) app.frameIntervals.push(now - lastFrame);
    if (app.frameIntervals.length > 2000) app.frameIntervals.splice(0, 1000);
    lastFrame = now;
    const fresh = [...board.active.values(), ...(board.changedAccepted === 'all' ? [] : board.changedAccepted)];
    renderer.render(board);
    app.renders++;
    const drawnAt = performance.timeOrigin + performance.now();
    for (const stroke of fresh) {
      if (stroke.owner === app.user || app.seen.has(stroke.id) || stroke.s.length === 0) continue;
      app.seen.add(stroke.id);
      app.latencies.push(drawnAt - stroke.s[2] / 1000);
    }
  });
}
window.addEventListener('resize', () => { renderer.resize(); requestRender(); });

// --- Input: pointer events are touch phases; coalesced and predicted events are samples.
const down = new Map(); // pointerId -> last time sent (ms)
let eraser = false;

function sample(e, pointerId) {
  const rect = canvas.getBoundingClientRect();
  const last = down.get(pointerId) ?? 0;
  const time = Math.max(last, performance.timeOrigin + e.timeStamp);
  const pen = e.pointerType === 'pen';
  const hasAngles = pen && (e.altitudeAngle !== undefined || e.tiltX !== 0 || e.tiltY !== 0);
  return [
    e.clientX - rect.left, e.clientY - rect.top, time,
    pen ? e.pressure : null,
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

function erase(e) {
  const rect = canvas.getBoundingClientRect();
  const hit = board.strokeAt(e.clientX - rect.left, e.clientY - rect.top, 6);
  if (hit) post({ t: 'erase', strokes: [hit.id] });
}

canvas.addEventListener('pointerdown', e => {
  e.preventDefault();
  if (app.role === 'watch') return;
  canvas.setPointerCapture?.(e.pointerId);
  if (eraser) { erase(e); down.set(e.pointerId, 0); return; }
  down.set(e.pointerId, 0);
  const s = samplesOf(e, []);
  post({ t: 'touch', phase: 'began', id: e.pointerId, s, p: predictedOf(e) });
});
canvas.addEventListener('pointermove', e => {
  if (!down.has(e.pointerId)) return;
  if (eraser) { erase(e); return; }
  const s = samplesOf(e, e.getCoalescedEvents ? e.getCoalescedEvents() : []);
  post({ t: 'touch', phase: 'moved', id: e.pointerId, s, p: predictedOf(e) });
});
canvas.addEventListener('pointerup', e => {
  if (!down.has(e.pointerId)) return;
  if (eraser) { down.delete(e.pointerId); return; }
  const s = samplesOf(e, []);
  down.delete(e.pointerId);
  post({ t: 'touch', phase: 'ended', id: e.pointerId, s });
});
canvas.addEventListener('pointercancel', e => {
  // A palm or a system gesture: the stroke is abandoned (seed 003).
  if (!down.has(e.pointerId)) return;
  down.delete(e.pointerId);
  if (!eraser) post({ t: 'touch', phase: 'cancelled', id: e.pointerId });
});

function predictedOf(e) {
  if (!e.getPredictedEvents) return [];
  const rect = canvas.getBoundingClientRect();
  const last = down.get(e.pointerId) ?? 0;
  return e.getPredictedEvents().map(p => [p.clientX - rect.left, p.clientY - rect.top, Math.max(last, performance.timeOrigin + p.timeStamp), null, null, null]);
}

// --- Toolbar.
const colourInput = document.getElementById('colour');
const widthInput = document.getElementById('width');
const storedColour = localStorage.getItem('touchsync-colour');
const initial = storedColour ? parseInt(storedColour, 16) : palette[Math.floor(Math.random() * palette.length)];
colourInput.value = '#' + (initial >>> 8).toString(16).padStart(6, '0');
function sendStyle() {
  const rgb = parseInt(colourInput.value.slice(1), 16);
  const rgba = ((rgb << 8) | 0xFF) >>> 0;
  localStorage.setItem('touchsync-colour', rgba.toString(16));
  post({ t: 'style', rgba, width: Number(widthInput.value) });
}
colourInput.addEventListener('change', sendStyle);
widthInput.addEventListener('change', sendStyle);
document.getElementById('undo').addEventListener('click', () => post({ t: 'undo' }));
document.getElementById('redo').addEventListener('click', () => post({ t: 'redo' }));
document.getElementById('clear-mine').addEventListener('click', () => post({ t: 'clear', scope: 'mine' }));
document.getElementById('clear-board').addEventListener('click', () => {
  if (confirm('Clear every stroke on this board, everyone\'s?')) post({ t: 'clear', scope: 'board' });
});
const eraserButton = document.getElementById('eraser');
eraserButton.addEventListener('click', () => {
  eraser = !eraser;
  eraserButton.classList.toggle('on', eraser);
});
document.addEventListener('keydown', e => {
  if ((e.ctrlKey || e.metaKey) && e.key === 'z') post({ t: e.shiftKey ? 'redo' : 'undo' });
});
document.getElementById('replay-link').href = `/boards/${encodeURIComponent(boardName)}/replay`;
document.getElementById('board-name').textContent = boardName;

// A closed tab says goodbye, so its live touches are cancelled at once.
window.addEventListener('pagehide', () => {
  if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ t: 'bye' }));
});

app.post = post;
app.disconnect = () => socket && socket.close();  // for tests: a dropped connection
app.rawSocket = () => socket;                      // for tests: messages the page itself would not send
connect();
requestRender();
